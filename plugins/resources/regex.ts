/**
 * The `$regex` / `__regex` checker: a pattern must compile in JavaScript and avoid the constructs the
 * database's PCRE2 rejects or reads differently, so a bad pattern is a 400 here rather than a
 * database error (500) later.
 */
import { QueryParamError } from './params.ts';

/** Escape every regular-expression metacharacter so `s` matches literally (JS and PCRE). */
export function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * @throws BadRequestError (400, `details.param` = `param`) for a pattern that is too long, does not
 *   compile, or would not be read the same way by the database.
 */
export function checkRegex(pattern: string, options: string, maxLength: number, param: string): void {
  if (pattern.length > maxLength) {
    throw new QueryParamError(`Regular expression longer than ${maxLength} characters`, param);
  }
  // With the `x` option the database ignores white space; JavaScript has no such flag, so the
  // pattern is checked the way the database will read it.
  const effective = options.includes('x') ? stripExtended(pattern) : pattern;
  if (effective === null) {
    throw new QueryParamError('Invalid regular expression: # comments and white space after ( are not supported with the x option', param);
  }
  try {
    new RegExp(effective);
  } catch {
    throw new QueryParamError('Invalid regular expression', param);
  }
  const problem = pcreProblem(effective);
  if (problem !== null) throw new QueryParamError(`Invalid regular expression: ${problem}`, param);
}

const EXTENDED_SPACE = /[ \t\n\v\f\r\u0085\u200e\u200f\u2028\u2029]/;

/**
 * The pattern as PCRE2 reads it in extended mode: unescaped white space outside classes removed.
 * null for what is refused in extended mode: a `#` comment, or white space between `(` and `?`
 * (PCRE2 rejects that, but the stripped pattern would hide it).
 */
function stripExtended(p: string): string | null {
  let out = '';
  let afterGroupOpen = false;
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    // Comments are refused rather than stripped: how the database checks their text cannot be
    // reproduced here, and a query-string pattern has no use for them.
    if (ch === '#') return null;
    if (EXTENDED_SPACE.test(ch)) {
      if (afterGroupOpen && /^\s*\?/.test(p.slice(i))) return null;
      continue;
    }
    afterGroupOpen = ch === '(';
    if (ch === '\\') {
      out += p.slice(i, i + 2);
      i++;
    } else if (ch === '[') {
      const end = classEnd(p, i);
      out += p.slice(i, end + 1);
      i = end;
    } else {
      out += ch;
    }
  }
  return out;
}

/** Letter escapes PCRE2 accepts without an argument (others are errors there, literals in JS). */
const PCRE_LETTER_ESCAPES = new Set('aAbBdDeEfGhHnNQErRsStvVwWXzZ');
/** Escapes PCRE2 rejects inside a character class. */
const PCRE_NOT_IN_CLASS = new Set('ABGNRXZz');
const CLASS_ESCAPES = 'dDwWsShHvVpP';
const PCRE_ASSERTIONS = new Set('AbBGKzZ');
/** Unicode properties accepted in `\p{...}`: general categories, `Any`, `L&` and common scripts. */
const UNICODE_PROPERTIES = new Set([
  ...'C Cc Cf Cn Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs'.split(' '),
  ...'Any L& Arabic Armenian Bengali Cyrillic Devanagari Georgian Greek Han Hangul Hebrew Hiragana Katakana Latin Thai'.split(' '),
]);

/**
 * The database evaluates `$regex` with PCRE2, which rejects some patterns that JavaScript accepts
 * (unknown letter escapes, empty classes, references to missing groups, huge or unbounded
 * lookbehind quantifiers...). Those would surface as a database error (500) instead of a 400, so
 * the common cases are caught here. `\C` is refused outright: it matches a single code unit and
 * can split UTF-8 characters. Returns a reason, or null when the pattern looks portable.
 */
function pcreProblem(p: string): string | null {
  const groups = scanGroups(p);
  for (const m of p.matchAll(/\{(\d+)(?:,(\d*))?\}/g)) {
    if (Number(m[1]) > 65535 || Number(m[2] ?? 0) > 65535) return 'quantifier too large';
  }
  // A literal in JavaScript, a quantifier in recent PCRE2.
  if (/\{,\d+\}/.test(p)) return 'write {0,n} instead of {,n}';
  let lookbehindDepth = -1;
  let depth = 0;
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === '\\') {
      const problem = escapeProblem(p, i, false, groups);
      if (problem !== null) return problem;
      i++;
    } else if (ch === '[') {
      const end = classEnd(p, i);
      const body = p.slice(p[i + 1] === '^' ? i + 2 : i + 1, end);
      if (body.length === 0) return 'empty character class';
      // PCRE2 reads `[:alpha:]` as a POSIX class (and `[:x:]` outside a class as an error) where
      // JavaScript sees ordinary characters, so class boundaries would differ.
      if (/^([:.=]).*\1$/s.test(body) || /\[[:.=]/.test(body)) return 'POSIX classes are not supported; use \\d, \\w or \\s';
      for (let j = 0; j < body.length; j++) {
        if (body[j] !== '\\') continue;
        const problem = escapeProblem(body, j, true, groups);
        if (problem !== null) return problem;
        const next = body[j + 1] ?? '';
        if (CLASS_ESCAPES.includes(next) && (body[j - 1] === '-' || (body[j + 2] === '-' && j + 3 < body.length))) {
          return 'invalid range in character class';
        }
        j++;
      }
      i = end;
    } else if (ch === '(') {
      depth++;
      if (lookbehindDepth < 0 && (p.startsWith('(?<=', i) || p.startsWith('(?<!', i))) lookbehindDepth = depth;
    } else if (ch === ')') {
      if (depth === lookbehindDepth) lookbehindDepth = -1;
      depth--;
    } else if (lookbehindDepth >= 0 && (ch === '*' || ch === '+' || (ch === '{' && /^\{\d*,\}/.test(p.slice(i))))) {
      return 'lookbehind of unbounded length';
    }
  }
  return null;
}

function escapeProblem(p: string, i: number, inClass: boolean, groups: { count: number; names: Set<string> }): string | null {
  const next = p[i + 1] ?? '';
  const after = p[i + 2] ?? '';
  if (/[1-9]/.test(next) && !inClass) return Number(next) > groups.count ? 'reference to a non-existent group' : null;
  if (!/[A-Za-z]/.test(next)) return null;
  let ok = PCRE_LETTER_ESCAPES.has(next);
  if (next === 'N') ok = after !== '{';
  if (next === 'c') ok = /[A-Za-z]/.test(after);
  if (next === 'x') ok = /[0-9A-Fa-f]/.test(after);
  if (next === 'p' || next === 'P') {
    const name = /^\{\^?([A-Za-z&]+)\}/.exec(p.slice(i + 2))?.[1];
    ok = name !== undefined && UNICODE_PROPERTIES.has(name);
  }
  // JavaScript reads `\k<x>` as a literal when no group has that name; PCRE2 rejects it.
  if (next === 'k') ok = !inClass && groups.names.has(/^<([A-Za-z_]\w*)>/.exec(p.slice(i + 2))?.[1] ?? '');
  if (inClass && PCRE_NOT_IN_CLASS.has(next)) ok = false;
  // PCRE2 cannot repeat an assertion; JavaScript reads `\z?` as an optional `z`.
  if (!inClass && PCRE_ASSERTIONS.has(next) && /[?*+{]/.test(after)) return 'quantifier after an assertion';
  return ok ? null : `unsupported escape \\${next}`;
}

/** Index of the `]` closing the class opened at `start` (JavaScript rules; the pattern is valid JS). */
function classEnd(p: string, start: number): number {
  for (let i = start + 1; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === ']') return i;
  }
  return p.length;
}

/** Number of capturing groups and the names of the named ones (JavaScript and PCRE2 syntax). */
function scanGroups(p: string): { count: number; names: Set<string> } {
  let count = 0;
  const names = new Set<string>();
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '[') i = classEnd(p, i);
    else if (p[i] === '(') {
      const named = /^\(\?(?:P?<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)')/.exec(p.slice(i));
      if (named) names.add(named[1] ?? named[2]!);
      if (named || p[i + 1] !== '?') count++;
    }
  }
  return { count, names };
}
