/** The privacy plugin's event types, declared once (the catalogue of `GET /events/types`). */
import type { EventTypeDefinition } from '../events/public/contributions.ts';
import { ERASURE_COMPLETED_EVENT } from './erasure.ts';
import { CONSENT_GRANTED_EVENT, CONSENT_REVOKED_EVENT } from './consents.ts';
import { ERASURE_ITEM_EVENT } from './erasure-run.ts';
import { consentResponse, erasureItemEventData, erasureResponse } from './schemas.ts';

export const privacyEventTypes: EventTypeDefinition[] = [
  { name: ERASURE_COMPLETED_EVENT, description: 'An erasure request completed; data is the request (ids and counts, never personal values)', data: erasureResponse },
  { name: CONSENT_GRANTED_EVENT, description: 'A user gave a consent; data is the consent', data: consentResponse },
  { name: CONSENT_REVOKED_EVENT, description: 'A consent was revoked, by its user or by an erasure; data is the consent', data: consentResponse },
  {
    name: ERASURE_ITEM_EVENT, description: "An erasure deleted or depersonalized a document of another collection (its audit entry's event); data names it, never its values",
    data: erasureItemEventData, outbound: false,
  },
];
