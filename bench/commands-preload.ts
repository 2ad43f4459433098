/**
 * Loaded with `--import` into a server under test (bench/deliveries.ts, `BENCH_DRAIN_FLAGS`): counts
 * the database commands the process sends, by command and collection (a bulk write's operations
 * counted too), and prints them to stderr when the process exits (and to stdout at each SIGUSR2). Bench only.
 */
import { MongoClient } from 'mongodb';

const counts = new Map<string, number>();
const add = (key: string, n = 1) => counts.set(key, (counts.get(key) ?? 0) + n);
const connect = MongoClient.prototype.connect;
MongoClient.prototype.connect = function (this: MongoClient) {
  (this as unknown as { monitorCommands: boolean }).monitorCommands = true;
  this.on('commandStarted', (e) => {
    const cmd = e.command as Record<string, unknown>;
    const coll = String(cmd[e.commandName] ?? '');
    add(`${e.commandName} ${coll}`);
    const ops = (cmd.updates ?? cmd.documents ?? cmd.deletes) as unknown[] | undefined;
    if (Array.isArray(ops)) add(`  ${e.commandName} ${coll} (statements)`, ops.length);
  });
  return connect.call(this) as ReturnType<MongoClient['connect']>;
};
// With bench/serve.ts: the counts so far on stdout at each SIGUSR2, before its `CPU` line (bench/create-commands.ts).
process.on('SIGUSR2', () => process.stdout.write(`COMMANDS ${JSON.stringify(Object.fromEntries(counts))}\n`));
process.once('exit', () => {
  const rows = [...counts].sort((a, b) => a[0].localeCompare(b[0]));
  process.stderr.write(`COMMANDS ${JSON.stringify(Object.fromEntries(rows))}\n`);
});
