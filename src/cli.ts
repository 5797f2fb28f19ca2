import { loadConfig, ConfigError } from './config.js';
import { createLogger } from './log.js';
import { StartupError } from './errors.js';

/**
 * The operator CLI: `npm run -s pmlake -- <command> [args]`. Each command lives in its own module and is
 * loaded only when asked for, so `keys create` does not pay for the ingest code and vice versa.
 */
const USAGE = `usage: pmlake <command> [options]

commands:
  serve                         start the HTTP API on $HOST:$PORT over $PMLAKE_LAKE (and an export worker unless
                                PMLAKE_EMBEDDED_WORKER=off)
  worker                        build export jobs from the queue in the state database (no HTTP)
  ingest <file-or-dir>...       detect each input's format and land it in the lake (one new version per batch)
  ingest --dry-run <file-or-dir>...
                                list what would land (format, already ingested, hours, estimated rows); writes nothing
  ingest --follow DIR...        land every closed file of the directories as it appears, one lake version per
                                PMLAKE_FOLLOW_SECONDS cycle, until SIGTERM
  compact                       merge each partition's files into one sorted file (a new lake version)
  record --out DIR [--assets ID,ID,...]
                                record the venue's market channel ($PMLAKE_VENUE_WS_URL) into rotating capture
                                files (docs/capture-format.md); every live token of the lake's catalogue unless
                                --assets pins a list
  catalogue --out DIR [--once]  poll the venue's catalogue (Gamma markets and events, CLOB markets) every
                                $PMLAKE_CATALOGUE_SECONDS into poll files (docs/catalogue-format.md)
  chain --out DIR [--from-block N] [--to-block N]
                                index the exchange contracts' logs (V1 and V2) from $PMLAKE_POLYGON_RPC_URL into
                                confirmed block-range files (docs/chain-format.md)
  lake versions [--json]        the lake's published versions and the current one
  generate --markets N --days D --seed S --out DIR
                                write synthetic venue-format source files
  keys create --email E --plan professional|free --name N
                                create an API key; prints the key and nothing else
  simulate --port P [--markets N] [--rate X] [--seed S]
                                a simulated venue: the market channel on ws://127.0.0.1:P/ws/market until stopped
  demo                          build the demo lake and serve it (what 'make demo' runs)
  bench [--help]                run the benchmark suite against plain DuckDB (a checkout's bench/cli.ts)
`;

type Command = (args: string[]) => Promise<number>;

const commands: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./commands/serve.js')).serveCommand,
  worker: async () => (await import('./commands/worker.js')).workerCommand,
  ingest: async () => (await import('../ingest/cli.js')).ingestCommand,
  record: async () => (await import('./commands/record.js')).recordCommand,
  catalogue: async () => (await import('./commands/catalogue.js')).catalogueCommand,
  chain: async () => (await import('./commands/chain.js')).chainCommand,
  compact: async () => (await import('../ingest/lake-cli.js')).compactCommand,
  lake: async () => (await import('../ingest/lake-cli.js')).lakeCommand,
  generate: async () => (await import('../sim/generate/cli.js')).generateCommand,
  keys: async () => (await import('./commands/keys.js')).keysCommand,
  simulate: async () => (await import('./commands/simulate.js')).simulateCommand,
  demo: async () => (await import('./commands/demo.js')).demoCommand,
  bench: async () => (await import('./commands/bench.js')).benchCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '-h' || name === '--help' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const load = commands[name];
  if (!load) {
    process.stderr.write(`unknown command: ${name}\n${USAGE}`);
    return 2;
  }
  return (await load())(args);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof StartupError) {
      process.stderr.write(`pmlake ${process.argv[2] ?? ''}: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    const log = createLogger();
    log.fatal({ err }, 'command failed');
    process.exitCode = 1;
  },
);

export { loadConfig };
