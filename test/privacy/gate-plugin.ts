/**
 * Test fixture: a personal-data declaration (`pd_gated`, model `PdGated`, linked by `owner_id`,
 * `nickname` depersonalized) whose next write can be held open, so a test can look at an erasure
 * request while its execution is in progress. `holdNextWrite()` arms the hold: the next `updateOne`
 * on the model waits until `release()` is called; `reached` resolves once a write is waiting.
 */
import { Schema, type Connection, type Model } from 'mongoose';
import { definePlugin } from '../../core/plugin.ts';

let armed: { reached: () => void; released: Promise<void> } | null = null;

export function holdNextWrite(): { reached: Promise<void>; release: () => void } {
  let reached!: () => void;
  let release!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  const released = new Promise<void>((r) => (release = r));
  armed = { reached, released };
  return { reached: reachedP, release };
}

const gatedSchema = new Schema(
  {
    tenant_id: { type: Schema.Types.ObjectId, required: true },
    owner_id: { type: Schema.Types.ObjectId, required: true },
    nickname: { type: String, default: null },
  },
  { versionKey: false },
);
gatedSchema.pre('updateOne', async function () {
  const hold = armed;
  if (!hold) return;
  armed = null;
  hold.reached();
  await hold.released;
});

export const gatedModel = (db: Connection) => (db.models.PdGated ?? db.model('PdGated', gatedSchema, 'pd_gated')) as Model<Record<string, unknown>>;

export const gatedDataPlugin = definePlugin({
  name: 'privacy-gated-data',
  setup({ db }) {
    gatedModel(db);
    return { personalData: [{ name: 'pd_gated', model: 'PdGated', subject_field: 'owner_id', gdpr_fields: ['nickname'] }] };
  },
});
