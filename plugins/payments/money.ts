/**
 * Exact money. Amounts travel as decimal strings (or JSON numbers, read through their shortest
 * decimal spelling) and are stored as integer minor units of their ISO 4217 currency; every sum is
 * an integer sum, every conversion goes through decimal.js. No binary floating point touches an amount.
 */
import { Decimal } from 'decimal.js';
import currencyCodes from 'currency-codes';

/** ISO 4217 entries that are not money one can pay with (minor unit "N.A." in the standard: metals, test and no-currency codes, units of account). */
const NOT_TENDER = new Set(['XAG', 'XAU', 'XBA', 'XBB', 'XBC', 'XBD', 'XDR', 'XPD', 'XPT', 'XSU', 'XTS', 'XUA', 'XXX']);

/** Largest amount in minor units: integers stay exact in JSON and in the database's numbers. */
export const MAX_MINOR = Number.MAX_SAFE_INTEGER;

/** Minor-unit digits of an ISO 4217 currency (`JPY` 0, `USD` 2, `KWD` 3), from the `currency-codes` table; undefined when unknown. */
export function currencyDigits(code: string): number | undefined {
  if (!/^[A-Z]{3}$/.test(code) || NOT_TENDER.has(code)) return undefined;
  return currencyCodes.code(code)?.digits;
}

/**
 * The one decimal form a string amount may take: digits without leading zeros, then optionally a
 * point and at least one digit. No sign (a leading `-` is only told apart to say "greater than
 * zero"), no blanks, no exponent, no bare point.
 */
const CANONICAL = /^-?(0|[1-9]\d*)(\.\d+)?$/;

/** Why an amount was refused: the message of the 422 issue. */
export type AmountProblem = string;

/**
 * Parses an amount for `currency` into integer minor units. Decimals beyond the currency's digits
 * are accepted only as trailing zeros (`"1.500"` USD is 1.50; `"1.505"` is refused).
 * @returns the minor units, or a problem (not a number, not positive, too many decimals, too large)
 * @example toMinor('12.5', 'USD') // 1250
 */
export function toMinor(value: unknown, currency: string): number | AmountProblem {
  const digits = currencyDigits(currency);
  if (digits === undefined) return 'unknown currency';
  let d: Decimal;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return 'must be a finite decimal';
    // A JSON number is read through its shortest round-trip spelling (0.1 → "0.1"), never its binary value.
    d = new Decimal(String(value));
  } else if (typeof value === 'string') {
    if (!CANONICAL.test(value)) return 'must be a decimal string such as "12.50"';
    d = new Decimal(value);
  } else return 'must be a decimal string or a number';
  if (d.lte(0)) return 'must be greater than zero';
  if (d.decimalPlaces() > digits) return `${currency} allows at most ${digits} decimal place${digits === 1 ? '' : 's'}`;
  const minor = d.times(new Decimal(10).pow(digits));
  if (minor.gt(MAX_MINOR)) return 'is too large';
  return minor.toNumber();
}

/** Minor units → the canonical decimal string of the currency (`1250, 'USD'` → `"12.50"`, `5, 'JPY'` → `"5"`). */
export function fromMinor(minor: number, currency: string): string {
  const digits = currencyDigits(currency) ?? 2;
  return new Decimal(minor).dividedBy(new Decimal(10).pow(digits)).toFixed(digits);
}

/**
 * `percent` % of `minor`, rounded half-up to a whole minor unit (fees).
 * @example percentOf(1999, '2.5') // 50
 */
export function percentOf(minor: number, percent: string): number {
  return new Decimal(minor).times(percent).dividedBy(100).toDecimalPlaces(0, Decimal.ROUND_HALF_UP).toNumber();
}

/** Compares a decimal string with an amount in minor units of `currency` (exactly): -1, 0 or 1. */
export function compareToMinor(value: string, minor: number, currency: string): number {
  const digits = currencyDigits(currency) ?? 2;
  return new Decimal(value).times(new Decimal(10).pow(digits)).comparedTo(minor);
}
