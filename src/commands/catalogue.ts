/** `pmlake catalogue`: being built (docs/catalogue-format.md). */
export function catalogueCommand(): Promise<number> {
  process.stderr.write('pmlake catalogue: not built yet\n');
  return Promise.resolve(2);
}
