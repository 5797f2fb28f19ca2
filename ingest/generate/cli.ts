export async function generateCommand(_args: string[]): Promise<number> {
  void _args;
  process.stderr.write('not implemented yet\n');
  return 1;
}
