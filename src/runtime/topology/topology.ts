import { InvalidArgumentError } from '../../errors.js';
import { checkActorName } from '../actor/checkActorName.js';
import { stageColumnFamilies } from '../stream/reserved.js';
import type { NamespaceDef } from '../stream/namespace.js';
import type { ColumnFamilyOptions } from '../../storage/store.js';
import type { StageDef, StageOutputs } from '../stream/stage.js';
import { startTopology, type RunningTopology, type TopologyStartOptions } from './running.js';

/**
 * What the type of a topology remembers of each stage: its query hook's request and answer,
 * its column family names. `columnFamilies` is optional so that a hand-written
 * `RunningTopology<{ count: { request: string; answer: bigint } }>` still type-checks (then
 * `compact` takes any family name and checks it when called).
 */
export interface StageTypes {
  readonly request: unknown;
  readonly answer: unknown;
  readonly columnFamilies?: string;
}

/**
 * The stages of a topology's type, for what is typed by them outside a `RunningTopology`:
 * `connectClusterClient<StagesOf<typeof topology>>(…)`.
 */
export type StagesOf<T> = T extends Topology<infer S> ? S : never;

/** The column family names a stage's types know (any string when they do not say). */
export type ColumnFamiliesOf<T extends StageTypes> = T extends { readonly columnFamilies: infer C extends string } ? C : string;

/** A stage as the topology holds it (types erased). */
export interface StageEntry {
  readonly name: string;
  readonly def: StageDef<any, StageOutputs, string, any, any>;
}

/**
 * A topology composed in code (after Kafka Streams' `StreamsBuilder`/`Topology`, with
 * xstate's `setup()` style of typed, immutable builders): stages and the namespaces between
 * them. Each `stage()` returns a new topology whose type also knows that stage, so
 * `RunningTopology.ask` is typed by the stage's query hook. A stage's input type is the type
 * of the namespace it reads, which is the type the stages that emit to it must give: TypeScript
 * refuses a handler of another type, or an `emit` of a value of another type.
 *
 * @example
 * const clicks = defineNamespace('clicks', { codec, partitions: 8, key: (c: Click) => c.host });
 * const topology = Topology.create('click-counter').stage('count', {
 *   input: clicks,
 *   columnFamilies: { hosts: { mergeOperator: int64Add() } },
 *   onMessage: (ctx, click) => ctx.writes.merge('hosts', click.host, encodeInt64(1)),
 *   query: async (reads, host: string) => decodeInt64((await reads.get('hosts', host))!),
 * });
 * const running = await topology.start({ broker: new MemoryBroker(), dataDir });
 */
export class Topology<S extends Record<string, StageTypes> = {}> {
  private constructor(
    readonly name: string,
    readonly stages: readonly StageEntry[],
  ) {
    Object.freeze(this);
  }

  /** An empty topology. @throws InvalidArgumentError for a name with `/` or whitespace */
  static create(name: string): Topology<{}> {
    namedAs('topology', name);
    return new Topology(name, []);
  }

  /**
   * Adds a stage named `name` (its actors are `/<name>/p<i>`, its broker subscription is
   * `name`, its stores `<dataDir>/stages/<name>/p<i>`).
   * @throws InvalidArgumentError for a duplicate or bad name, a reserved column family name
   *   (`default`, `sf.*`), or when a namespace name is declared twice with different definitions
   */
  stage<N extends string, I, O extends StageOutputs = {}, C extends string = never, Q = never, R = never>(
    name: N,
    def: StageDef<I, O, C, Q, R>,
  ): Topology<S & { [K in N]: { request: Q; answer: R; columnFamilies: C } }> {
    namedAs(`topology ${this.name}: stage`, name);
    try {
      stageColumnFamilies(def.columnFamilies ?? {}); // a reserved or empty family name is refused here, not at start
    } catch (err) {
      throw new InvalidArgumentError(`topology ${this.name}: stage ${name}: ${(err as Error).message}`);
    }
    if (def.maxAttempts !== undefined && !(def.maxAttempts >= 1)) throw new InvalidArgumentError(`stage ${name}: maxAttempts must be at least 1 (or Infinity), not ${def.maxAttempts}`);
    if (this.stages.some((s) => s.name === name)) throw new InvalidArgumentError(`topology ${this.name}: stage ${name} is declared twice`);
    const entry: StageEntry = { name, def: def as unknown as StageEntry['def'] };
    const next = new Topology<S & { [K in N]: { request: Q; answer: R; columnFamilies: C } }>(this.name, [...this.stages, entry]);
    next.namespaces(); // checks that each name has one definition
    return next;
  }

  /** Every namespace the stages read or emit to, by name. @throws InvalidArgumentError when a name has two definitions */
  namespaces(): Map<string, NamespaceDef<unknown>> {
    const out = new Map<string, NamespaceDef<unknown>>();
    const add = (ns: NamespaceDef<unknown>) => {
      const had = out.get(ns.name);
      if (had && had !== ns) throw new InvalidArgumentError(`topology ${this.name}: namespace ${ns.name} is defined twice (define it once and share the value)`);
      out.set(ns.name, ns);
    };
    for (const s of this.stages) {
      add(s.def.input);
      for (const ns of Object.values(s.def.outputs ?? {})) add(ns);
    }
    return out;
  }

  /** Names of the namespaces some stage consumes. */
  consumed(): Set<string> {
    return new Set(this.stages.map((s) => s.def.input.name));
  }

  /**
   * The topology as text: namespaces (partitions, partitioner, who writes and reads them),
   * then stages (input -> outputs, column families with their merge operators and compaction
   * filters, actors).
   */
  describe(): string {
    const lines = [`topology ${this.name}`, '  namespaces:'];
    const consumed = this.consumed();
    for (const ns of this.namespaces().values()) {
      const readers = this.stages.filter((s) => s.def.input === ns).map((s) => s.name);
      const writers = this.stages.filter((s) => Object.values(s.def.outputs ?? {}).includes(ns)).map((s) => s.name);
      const n = ns.partitioner.partitions;
      lines.push(
        `    ${ns.name}: ${n} partition${n === 1 ? '' : 's'} (${ns.partitioner.describe()}), ` +
          `from ${writers.length ? writers.join(', ') : 'producers'}, ` +
          (consumed.has(ns.name) ? `read by ${readers.join(', ')}` : 'read by no stage (leaves the topology; not counted for quiescence)'),
      );
    }
    lines.push('  stages:');
    for (const s of this.stages) {
      const outputs = Object.entries(s.def.outputs ?? {}).map(([k, ns]) => (k === ns.name ? k : `${k}=${ns.name}`));
      lines.push(`    ${s.name}: ${s.def.input.name} -> ${outputs.length ? outputs.join(', ') : '(no outputs)'}`);
      const cfs = Object.entries(s.def.columnFamilies ?? {}).map(([cf, o]) => {
        const extras = columnFamilyExtras(o);
        return extras.length ? `${cf} (${extras.join(', ')})` : cf;
      });
      lines.push(`      store: ${cfs.length ? cfs.join(', ') : '(no column families)'} + sf.meta, sf.outbox`);
      const hooks = [s.def.onMessage && 'onMessage', s.def.onBatch && 'onBatch', s.def.query && 'query'].filter(Boolean);
      lines.push(`      hooks: ${hooks.join(', ') || 'none'}`);
      const n = s.def.input.partitioner.partitions;
      lines.push(`      actors: /${s.name}/p0${n > 1 ? ` .. /${s.name}/p${n - 1}` : ''}`);
    }
    return lines.join('\n');
  }

  /** Starts the topology on a broker: see {@link TopologyStartOptions} and {@link RunningTopology}. */
  start(options: TopologyStartOptions): Promise<RunningTopology<S>> {
    return startTopology(this, options);
  }
}

/**
 * What a column family's store must be opened with besides its name, as text: its merge
 * operator's name and its compaction filter's kind (`['shardflow.int64_add.v1', 'filter ttl']`).
 * What `Topology.describe()` shows and a cluster compares between workers (`clusterStages`).
 */
export function columnFamilyExtras(o: ColumnFamilyOptions): string[] {
  return [o.mergeOperator?.name, o.compactionFilter ? `filter ${o.compactionFilter.kind}` : undefined].filter((x): x is string => x !== undefined);
}

/**
 * `checkActorName` (the name becomes an actor's: 1-200 characters, no `/`, no whitespace),
 * and not `.` or `..` (it names a folder: a stage `..` put its stores beside `stages/`), its
 * refusal naming what was named.
 * @throws InvalidArgumentError
 */
function namedAs(what: string, name: unknown): asserts name is string {
  let actorName = true;
  try {
    checkActorName(name);
  } catch {
    actorName = false;
  }
  if (!actorName || name === '.' || name === '..') {
    throw new InvalidArgumentError(`${what} name must be 1-200 characters without '/' or whitespace, and not '.' or '..' (it names actors, a subscription and a folder), got ${JSON.stringify(name)}`);
  }
}
