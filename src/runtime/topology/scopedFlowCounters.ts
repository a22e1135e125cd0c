import { FlowCounters, type MessageKey } from '../stream/flowCounters.js';

/**
 * Flow counters that count only the namespaces some stage of the topology consumes: a
 * message sent to a namespace that leaves the topology (read by another program) is never
 * settled here, and counting it would keep quiescence from ever being reached.
 */
export class ScopedFlowCounters extends FlowCounters {
  constructor(readonly consumed: ReadonlySet<string>) {
    super();
  }

  override onSent(ns: string, key?: MessageKey): boolean {
    return this.consumed.has(ns) ? super.onSent(ns, key) : false;
  }

  override onSendFailed(ns: string, key?: MessageKey): void {
    if (this.consumed.has(ns)) super.onSendFailed(ns, key);
  }
}
