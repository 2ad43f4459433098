import { Types } from 'mongoose';
import { KnownByDocument } from '../plugins/events/known.ts';
const k = new KnownByDocument(50_000);
const ids = Array.from({ length: 10000 }, () => new Types.ObjectId());
for (const id of ids) k.add(KnownByDocument.key('projects', id), ['evt_' + String(new Types.ObjectId())]);
let t = process.hrtime.bigint(); let n = 0;
for (let r = 0; r < 20; r++) for (const id of ids) { n += k.of(KnownByDocument.key('projects', id)).length; }
console.log('of ns', Number(process.hrtime.bigint() - t) / 200000);
t = process.hrtime.bigint();
for (let r = 0; r < 20; r++) for (const id of ids) { k.add(KnownByDocument.key('projects', id), ['evt_' + 'x'.repeat(24)]); }
console.log('add ns', Number(process.hrtime.bigint() - t) / 200000);
t = process.hrtime.bigint();
for (let r = 0; r < 20; r++) for (const id of ids) { n += String(id).length; }
console.log('String(oid) ns', Number(process.hrtime.bigint() - t) / 200000);
