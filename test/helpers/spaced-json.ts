/**
 * JSON Lines as another writer may space them: each line the same JSON with a space after every `{`, `[`, `,` and
 * `:` (JSON.stringify's indentation folded onto one line, `{ "kind": "catalogue_poll", "format": 1, … }`). Only
 * the layout changes: every line parses to the same value, and strings (a page body, a frame) keep their bytes.
 */
export function spacedJson(v: unknown): string {
  // Newlines inside strings are escaped by JSON.stringify, so every raw newline here is indentation.
  return JSON.stringify(v, null, 1).replace(/\n */g, ' ');
}

/** Every line of a JSON Lines text re-written spaced; a line that is not JSON (blank, torn) is kept as it is. */
export function respaced(text: string): string {
  return text
    .split('\n')
    .map((l) => {
      try {
        return spacedJson(JSON.parse(l));
      } catch {
        return l;
      }
    })
    .join('\n');
}
