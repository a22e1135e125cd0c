// The cluster tests' two-stage click counter (test/kit/cluster.ts) as a topology module for
// `shardflow worker --topology test/kit/clusterTopology.ts`: the default export is the
// Topology; `factory` is the same built by a function (the `--export` form).
import { clusterClickTopology } from './cluster.js';

export default clusterClickTopology().topology;
export const factory = () => clusterClickTopology().topology;
export const notATopology = 42;
