/** The errors of the payments plugin beyond the core ones. */
import { AppError, ConflictError, type ErrorCodes } from '../../core/errors.ts';
import type { PaymentStatus } from './model.ts';

/** The provider failed or answered something we cannot use: 502 `PROVIDER_ERROR`. */
export class ProviderError extends AppError {
  constructor(provider: string, message: string) {
    super(502, 'PROVIDER_ERROR', `Payment provider "${provider}" failed: ${message}`, { provider });
  }
}

/** A refund above what is left to refund (captured minus refunded minus held): 400. */
export class RefundExceedsCapturedError extends AppError {
  constructor(details: Record<string, unknown>) {
    super(400, 'REFUND_EXCEEDS_CAPTURED', 'The refunds would exceed the captured amount', details);
  }
}

/** The payments plugin's codes in the error catalogue. */
export const paymentErrorCodes: ErrorCodes = {
  REFUND_EXCEEDS_CAPTURED: {
    example: new RefundExceedsCapturedError({ refundable: '20.00' }),
    description: 'A refund above what is left of the captured amount (`details.refundable`).',
  },
  PROVIDER_ERROR: {
    example: new ProviderError('stripe', 'timeout'),
    description: 'The payment provider failed or answered a status the provider map does not know.',
  },
};

/** 409 naming the current status (and the states the operation starts from). */
export function transitionConflict(current: PaymentStatus | string, operation: string, from: readonly string[]): ConflictError {
  return new ConflictError(`Cannot ${operation} a payment that is ${current}`, { status: current, operation, allowed_from: [...from] });
}

/** An error's message, cut to what a stored record keeps. */
export const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 500);
