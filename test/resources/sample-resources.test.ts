import { afterAll, describe, expect, it } from 'vitest';
import { Schema } from 'mongoose';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { defineResource, resourcesPlugin } from '../../plugins/resources/index.ts';

const notes = defineResource({ name: 'sample_notes', schema: new Schema({ text: { type: String, required: true } }) });

describe('SAMPLE_RESOURCES_ENABLED', () => {
  const apps: TestApp[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  it('registers /projects and /tasks unless NODE_ENV is production; an explicit value wins', async () => {
    for (const [config, status] of [
      [{ NODE_ENV: 'test' }, 200],
      [{ NODE_ENV: 'development' }, 200],
      [{ NODE_ENV: 'production', METRICS_ENABLED: 'false' }, 404],
      [{ NODE_ENV: 'production', METRICS_ENABLED: 'false', SAMPLE_RESOURCES_ENABLED: 'true' }, 200],
      [{ NODE_ENV: 'test', SAMPLE_RESOURCES_ENABLED: 'false' }, 404],
    ] as const) {
      const app = await buildTestApp({ plugins: [resourcesPlugin], config });
      apps.push(app);
      expect((await app.http('GET', '/projects')).status, JSON.stringify(config)).toBe(status);
      expect((await app.http('GET', '/tasks')).status, JSON.stringify(config)).toBe(status);
    }
  }, 60_000);

  it('resources given as an option replace the samples', async () => {
    const app = await buildTestApp({ plugins: [resourcesPlugin.configure({ resources: [notes] })], config: { SAMPLE_RESOURCES_ENABLED: 'true' } });
    apps.push(app);
    expect((await app.http('GET', '/projects')).status).toBe(404);
    expect((await app.http('GET', '/sample_notes')).status).toBe(200);
  });

  it('a bad value stops start-up naming the setting', async () => {
    await expect(buildTestApp({ plugins: [resourcesPlugin], config: { SAMPLE_RESOURCES_ENABLED: 'maybe' } })).rejects.toThrow(/SAMPLE_RESOURCES_ENABLED/);
  });
});
