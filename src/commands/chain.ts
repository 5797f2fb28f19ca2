/** `pmlake chain`: being built (docs/chain-format.md). */
export function chainCommand(): Promise<number> {
  process.stderr.write('pmlake chain: not built yet\n');
  return Promise.resolve(2);
}
