/**
 * SQL text with bound values, written once for both state backends: `sql\`SELECT * FROM users WHERE id = ${id}\``
 * keeps every interpolated value out of the text (placeholders `?` for SQLite, `$1…` for PostgreSQL, chosen
 * when the statement runs). A fragment made by `sql`, `list` or `raw` nests as text with its own values.
 */
export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}

  /** The text for one dialect and its values in order (fragments spliced in, booleans as 0/1 for both). */
  compile(dialect: Dialect): { text: string; values: unknown[] } {
    const out: unknown[] = [];
    const text = this.render(dialect, out);
    return { text, values: out };
  }

  private render(dialect: Dialect, out: unknown[]): string {
    let text = this.strings[0]!;
    for (let i = 0; i < this.values.length; i += 1) {
      const v = this.values[i];
      if (v instanceof Sql) text += v.render(dialect, out);
      else {
        // Both schemas store flags as integers: SQLite cannot bind a boolean, and one column type keeps rows alike.
        out.push(typeof v === 'boolean' ? (v ? 1 : 0) : v === undefined ? null : v);
        text += dialect === 'postgres' ? `$${out.length}` : '?';
      }
      text += this.strings[i + 1]!;
    }
    return text;
  }
}

export type Dialect = 'sqlite' | 'postgres';

export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  return new Sql(strings, values);
}

/** A comma-separated list of bound values, for `IN (${list(names)})`. Never empty (SQL has no empty IN list). */
export function list(values: readonly unknown[]): Sql {
  if (values.length === 0) throw new Error('empty SQL list');
  return new Sql(['', ...values.slice(1).map(() => ', '), ''], values);
}

/** Fragments joined by a separator: `VALUES ${join(rows.map((r) => sql\`(${r.a}, ${r.b})\`), ', ')}`. */
export function join(parts: readonly Sql[], separator: string): Sql {
  if (parts.length === 0) throw new Error('empty SQL join');
  return new Sql(['', ...parts.slice(1).map(() => separator), ''], parts);
}

/** Trusted text (never user input): a dialect's own spelling of one construct. */
export function raw(text: string): Sql {
  return new Sql([text], []);
}
