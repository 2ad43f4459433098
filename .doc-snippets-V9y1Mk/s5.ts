import { defineResource, Schema } from 'plugin-api-server';

export const invoices = defineResource({
  name: 'invoices',
  schema: new Schema({
    number: { type: String, required: true },
    amount: { type: Number, required: true, min: 0 },
    customer_id: { type: Schema.Types.ObjectId, ref: 'customers' },
    internal_note: { type: String, private: true },   // never returned, filtered or audited
    lines: { type: Number, integer: true },           // `integer: true` → zod int, GraphQL Int
  }),
  searchable_fields: ['number'],
  guards: { features: ['billing'], attributes: [{ attribute: 'region', field: 'region' }] },
  cascade: [{ field: 'customer_id', references: 'customers', on_delete: 'deny' }],
});
export {};
