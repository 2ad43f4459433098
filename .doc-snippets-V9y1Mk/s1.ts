import { writeFile } from 'node:fs/promises';
import openapiTS, { astToString } from 'openapi-typescript';
const doc = await (await fetch('http://localhost:3000/openapi.json')).json();
await writeFile('src/api.ts', astToString(await openapiTS(doc)));
export {};
