/**
 * The node side of pods: scheduling onto the one local node, starting containers (init containers first),
 * the status a kubelet reports (phase, conditions, containerStatuses), graceful deletion, container
 * restarts, and what answers pods/exec. Pods labelled `ovn.kubernetes.io/vpc-nat-gw=true` are backed by a
 * NAT gateway simulator, or by a GatewayBackend when one is given (local/kube-api/backend.ts; local/netns/ runs
 * kube-ovn's script in network namespaces); every other pod only knows a handful of harmless shell built-ins.
 */
import { createHash } from 'node:crypto';
import { net1Address } from '../../shared/domain/gateway-pod.js';
import { GATEWAY_CONTAINER, Label } from '../../shared/domain/kube-ovn.js';
import { cniRoutesOf, containerEnvOf } from '../natgw/pod.js';
import type { KubeOvnRelease } from '../natgw/releases.js';
import {
  type ExecOutcome,
  type ExternalSegment,
  NatGatewaySim,
  type NatGatewaySimOptions,
  type ToolHook,
} from '../natgw/sim.js';
import type { GatewayBackend } from './backend.js';
import { type FieldError, fieldForbidden, fieldRequired } from './errors.js';
import { clone, isObject, type JsonObject, type JsonValue, meta, rfc3339 } from './json.js';
import type { KindHooks, Objects } from './objects.js';
import type { ResourceDef } from './registry.js';

export type { ExecOutcome };

// The gateway pod's label and container: kube-ovn's names, defined once in shared/domain/kube-ovn.ts.
const GATEWAY_LABEL = Label.vpcNatGw;
export const NODE_NAME = 'local-node';
const HOST_IP = '172.18.0.2';

export interface KubeletOptions {
  /** The external L2 segment every gateway of this API joins (duplicate address detection between them). */
  segment: ExternalSegment;
  /** How long a restarted container stays not-ready before it runs again. */
  restartDelayMs: number;
  /** The kube-ovn release whose nat-gateway.sh every gateway container runs (default: the lab's). */
  release?: KubeOvnRelease;
  log: (line: string) => void;
  /** Backs gateway pods instead of the simulator (default: the simulator). */
  backend?: GatewayBackend;
}

function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function isGatewayPod(pod: JsonObject): boolean {
  const labels = isObject(pod.metadata) ? pod.metadata.labels : undefined;
  return isObject(labels) && labels[GATEWAY_LABEL] === 'true';
}

/**
 * The gateway pod's own net1 address in CIDR form, from its multus/kube-ovn annotations, read by the product's own
 * rule (shared/domain/gateway-pod.ts): the first attachment of `k8s.v1.cni.cncf.io/networks` (`<ns>/<net>`) →
 * `<net>.<ns>.kubernetes.io/ip_address` plus the prefix length of `<net>.<ns>.kubernetes.io/cidr`.
 */
export function net1Of(pod: JsonObject): string | undefined {
  const m = isObject(pod.metadata) ? pod.metadata : {};
  const ann = isObject(m.annotations) ? m.annotations : {};
  const strings: Record<string, string> = {};
  for (const [k, v] of Object.entries(ann)) if (typeof v === 'string') strings[k] = v;
  return net1Address(typeof m.namespace === 'string' ? m.namespace : 'default', strings);
}

/** The gateway pod's eth0 (LAN) address in CIDR form, from kube-ovn's `ovn.kubernetes.io/ip_address` and `/cidr`. */
export function eth0Of(pod: JsonObject): string | undefined {
  const ann = isObject(pod.metadata) && isObject(pod.metadata.annotations) ? pod.metadata.annotations : {};
  const ip = ann['ovn.kubernetes.io/ip_address'];
  const cidr = ann['ovn.kubernetes.io/cidr'];
  if (typeof ip !== 'string' || typeof cidr !== 'string' || ip === '' || cidr === '') return undefined;
  const prefix = cidr.split(',')[0]?.split('/')[1];
  return prefix ? `${ip.split(',')[0]}/${prefix}` : undefined;
}

// ---------------------------------------------------------------- built-in commands of ordinary pods

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function tokenize(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | undefined;
  let has = false;
  for (const c of line) {
    if (quote) {
      if (c === quote) quote = undefined;
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (/\s/.test(c)) {
      if (has || cur) out.push(cur);
      cur = '';
      has = false;
    } else {
      cur += c;
    }
  }
  if (has || cur) out.push(cur);
  return out;
}

const BUILTINS_HELP = 'echo, printf, true, false, cat, exit and sh -c with those';

function runSimple(
  argv: readonly string[],
  stdin: string,
  out: { stdout: string; stderr: string },
  inShell: boolean,
): number | 'exit' {
  let args = [...argv];
  let toStderr = false;
  if (inShell) {
    const redirect = args.findIndex((a) => a === '>&2' || a === '1>&2');
    if (redirect >= 0) {
      toStderr = true;
      args = args.filter((_, i) => i !== redirect);
    }
  }
  const write = (s: string): void => {
    if (toStderr) out.stderr += s;
    else out.stdout += s;
  };
  const [cmd, ...rest] = args;
  switch (cmd) {
    case undefined:
      return 0;
    case 'echo': {
      const noNewline = rest[0] === '-n';
      write(`${(noNewline ? rest.slice(1) : rest).join(' ')}${noNewline ? '' : '\n'}`);
      return 0;
    }
    case 'printf':
      write((rest[0] ?? '').replace(/\\n/g, '\n').replace(/\\t/g, '\t'));
      return 0;
    case 'true':
      return 0;
    case 'false':
      return 1;
    case 'cat':
      write(stdin);
      return 0;
    default:
      out.stderr += inShell
        ? `sh: 1: ${cmd}: not found\n`
        : `${cmd}: not available in this pod of the local Kubernetes API (only ${BUILTINS_HELP} run here; nothing runs on the host)\n`;
      return 127;
  }
}

/** The exec answer of a pod without a simulator. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function runBuiltin(argv: readonly string[], stdin: string): ExecOutcome {
  const out = { stdout: '', stderr: '' };
  const [cmd, flag, script] = argv;
  if (
    (cmd === 'sh' || cmd === 'bash' || cmd === '/bin/sh' || cmd === '/bin/bash') &&
    flag === '-c' &&
    script !== undefined
  ) {
    let code = 0;
    for (const part of script.split(/;|\n/)) {
      const words = tokenize(part);
      if (words[0] === 'exit') {
        const n = Number.parseInt(words[1] ?? String(code), 10);
        return { ...out, exitCode: Number.isNaN(n) ? 2 : ((n % 256) + 256) % 256 };
      }
      const r = runSimple(words, stdin, out, true);
      code = r === 'exit' ? code : r;
    }
    return { ...out, exitCode: code };
  }
  const r = runSimple(argv, stdin, out, false);
  return { ...out, exitCode: r === 'exit' ? 0 : r };
}

/** Whether a command of an ordinary pod reads stdin (so the session waits for stdin's end). */
export function readsStdin(argv: readonly string[]): boolean {
  if (argv[0] === 'cat') return true;
  if ((argv[0] === 'sh' || argv[0] === 'bash') && argv[1] === '-c')
    return /(^|[;\s])cat(\s|;|$)/.test(argv[2] ?? '');
  return false;
}

// ---------------------------------------------------------------- the kubelet

function containerId(seed: string): string {
  return `containerd://${createHash('sha256').update(seed).digest('hex')}`;
}

function arr(v: JsonValue | undefined): JsonObject[] {
  return Array.isArray(v) ? (v.filter(isObject) as JsonObject[]) : [];
}

function condition(type: string, ok: boolean, now: string, reason?: string, message?: string): JsonObject {
  const c: JsonObject = { type, status: ok ? 'True' : 'False', lastProbeTime: null, lastTransitionTime: now };
  if (reason) c.reason = reason;
  if (message) c.message = message;
  return c;
}

export class Kubelet {
  private readonly sims = new Map<string, NatGatewaySim>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private nextIp = 10;
  private closed = false;
  /** Backend operations in flight (pod set-up, removal). */
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    private readonly objects: Objects,
    private readonly def: ResourceDef,
    private readonly options: KubeletOptions,
  ) {}

  gateway(namespace: string, name: string): NatGatewaySim | undefined {
    return this.sims.get(podKey(namespace, name));
  }

  private now(): string {
    return rfc3339(this.objects.clock());
  }

  private stored(namespace: string, name: string): JsonObject | undefined {
    return this.objects.store.get('/pods', namespace, name);
  }

  private write(next: JsonObject): JsonObject {
    return this.objects.writeInternal(this.def, next);
  }

  private allocateIp(pod: JsonObject): string {
    const ann = isObject(pod.metadata) && isObject(pod.metadata.annotations) ? pod.metadata.annotations : {};
    const own = ann['ovn.kubernetes.io/ip_address'];
    if (typeof own === 'string' && own !== '') return own.split(',')[0] as string;
    const n = this.nextIp++;
    return `10.16.${Math.floor(n / 254)}.${(n % 254) + 1}`;
  }

  hooks(): KindHooks {
    return {
      prepareCreate: (pod) => this.prepareCreate(pod),
      validateUpdate: (pod, old) => this.validateUpdate(pod, old),
      afterCreate: (pod) => this.afterCreate(pod),
      afterDelete: (pod) => {
        const m = pod.metadata as JsonObject;
        const key = podKey(String(m.namespace), String(m.name));
        const sim = this.sims.get(key);
        if (sim) this.options.segment.leave(sim);
        this.sims.delete(key);
        if (this.options.backend && isGatewayPod(pod)) this.track(this.options.backend.remove(pod));
      },
      deleteWithoutFinalizers: (pod, options) => this.deleteGracefully(pod, options.gracePeriodSeconds),
    };
  }

  private prepareCreate(pod: JsonObject): FieldError[] {
    const errors: FieldError[] = [];
    const spec = isObject(pod.spec) ? pod.spec : {};
    pod.spec = spec;
    const containers = arr(spec.containers);
    if (containers.length === 0) errors.push(fieldRequired('spec.containers', ''));
    for (const [field, list] of [
      ['containers', containers],
      ['initContainers', arr(spec.initContainers)],
    ] as const) {
      list.forEach((c, i) => {
        if (typeof c.name !== 'string' || c.name === '')
          errors.push(fieldRequired(`spec.${field}[${i}].name`, ''));
        if (typeof c.image !== 'string' || c.image === '')
          errors.push(fieldRequired(`spec.${field}[${i}].image`, ''));
        c.terminationMessagePath ??= '/dev/termination-log';
        c.terminationMessagePolicy ??= 'File';
        c.imagePullPolicy ??= 'IfNotPresent';
        c.resources ??= {};
      });
    }
    for (const e of errors) e.detail = e.detail.replace(/: $/, '');
    spec.restartPolicy ??= 'Always';
    spec.terminationGracePeriodSeconds ??= 30;
    spec.dnsPolicy ??= 'ClusterFirst';
    spec.schedulerName ??= 'default-scheduler';
    spec.securityContext ??= {};
    spec.serviceAccountName ??= 'default';
    spec.serviceAccount ??= spec.serviceAccountName;
    spec.enableServiceLinks ??= true;
    spec.preemptionPolicy ??= 'PreemptLowerPriority';
    spec.priority ??= 0;
    if ((spec.nodeName === undefined || spec.nodeName === '') && spec.schedulerName === 'default-scheduler') {
      spec.nodeName = NODE_NAME;
    }
    pod.status = { phase: 'Pending', qosClass: 'BestEffort' };
    return errors;
  }

  private validateUpdate(pod: JsonObject, old: JsonObject): FieldError[] {
    const neutral = (p: JsonObject): JsonObject => {
      const s = clone(isObject(p.spec) ? p.spec : {});
      for (const list of ['containers', 'initContainers']) for (const c of arr(s[list])) delete c.image;
      delete s.activeDeadlineSeconds;
      delete s.tolerations;
      delete s.terminationGracePeriodSeconds;
      return s;
    };
    if (JSON.stringify(sortKeys(neutral(pod))) === JSON.stringify(sortKeys(neutral(old)))) return [];
    return [
      fieldForbidden(
        'spec',
        'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
      ),
    ];
  }

  private afterCreate(pod: JsonObject): void {
    const m = pod.metadata as JsonObject;
    const spec = pod.spec as JsonObject;
    if (!spec.nodeName) return; // unschedulable: stays Pending
    if (this.options.backend && isGatewayPod(pod)) {
      this.startOnBackend(String(m.namespace), String(m.name), { restart: false });
      return;
    }
    if (isGatewayPod(pod)) this.createSim(pod);
    this.start(String(m.namespace), String(m.name), { restart: false });
  }

  private track(p: Promise<unknown>): void {
    const t = p.catch((e: unknown) => this.options.log(`gateway backend: ${(e as Error).message}`));
    this.pending.add(t);
    void t.finally(() => this.pending.delete(t));
  }

  /** The backend sets the pod up and runs its init containers; then the status is written as start() does. */
  private startOnBackend(
    namespace: string,
    name: string,
    how: { restart: boolean; lastState?: Map<string, JsonObject> },
  ): void {
    const pod = this.stored(namespace, name);
    const backend = this.options.backend;
    if (!pod || !backend) return;
    const uid = (pod.metadata as JsonObject).uid;
    this.track(
      backend.start(clone(pod), how.restart).then((initOutcomes) => {
        const now = this.stored(namespace, name);
        if (this.closed || (now?.metadata as JsonObject | undefined)?.uid !== uid) return;
        this.start(namespace, name, { ...how, initOutcomes });
      }),
    );
  }

  /** Resolves when every backend operation started so far has settled. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /** A fresh simulator for a gateway pod, addressed from its annotations (an unusable address is left out). */
  private createSim(pod: JsonObject): void {
    const m = pod.metadata as JsonObject;
    const key = podKey(String(m.namespace), String(m.name));
    const old = this.sims.get(key);
    if (old) this.options.segment.leave(old);
    const routes = cniRoutesOf(pod);
    const options: NatGatewaySimOptions = {
      segment: this.options.segment,
      now: this.objects.clock,
      env: containerEnvOf(pod),
      ...(this.options.release && { release: this.options.release }),
      ...(routes && { routes }),
    };
    const net1 = net1Of(pod);
    if (net1?.includes('/')) options.net1 = net1;
    const eth0 = eth0Of(pod);
    if (eth0) options.eth0 = eth0;
    let sim: NatGatewaySim;
    try {
      sim = new NatGatewaySim(options);
    } catch (e) {
      this.options.log(`pod ${key}: ${(e as Error).message}; simulating it without its own addresses`);
      sim = new NatGatewaySim({ ...options, net1: undefined, eth0: undefined, routes: undefined });
    }
    this.sims.set(key, sim);
  }

  /** Runs the init containers and the containers; writes the resulting status. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private start(
    namespace: string,
    name: string,
    how: { restart: boolean; lastState?: Map<string, JsonObject>; initOutcomes?: ExecOutcome[] },
  ): void {
    const current = this.stored(namespace, name);
    if (!current) return;
    const pod = clone(current);
    const spec = pod.spec as JsonObject;
    const prev = isObject(pod.status) ? pod.status : {};
    const now = this.now();
    const sim = this.sims.get(podKey(namespace, name));
    const inits = arr(spec.initContainers);
    const initStatuses: JsonObject[] = [];
    let failed: string | undefined;
    for (const [i, c] of inits.entries()) {
      const argv = [
        ...(Array.isArray(c.command) ? c.command : []),
        ...(Array.isArray(c.args) ? c.args : []),
      ].map(String);
      // Only a gateway's init containers do something (through its simulator or backend); others just complete.
      const outcome = how.initOutcomes
        ? (how.initOutcomes[i] ?? { stdout: '', stderr: 'not run', exitCode: 1 })
        : sim
          ? sim.runContainer(argv)
          : { stdout: '', stderr: '', exitCode: 0 };
      const prevInit = arr(prev.initContainerStatuses).find((s) => s.name === c.name);
      initStatuses.push({
        name: c.name as JsonValue,
        state: {
          terminated: {
            exitCode: outcome.exitCode,
            reason: outcome.exitCode === 0 ? 'Completed' : 'Error',
            startedAt: now,
            finishedAt: now,
            containerID: containerId(`${namespace}/${name}/${String(c.name)}/${now}`),
          },
        },
        lastState: {},
        ready: outcome.exitCode === 0,
        restartCount: Number(prevInit?.restartCount ?? 0),
        image: c.image as JsonValue,
        imageID: '',
        containerID: containerId(`${namespace}/${name}/${String(c.name)}/${now}`),
        started: false,
      });
      if (outcome.exitCode !== 0) {
        this.options.log(
          `pod ${namespace}/${name}: init container ${String(c.name)} exited ${outcome.exitCode}: ${outcome.stderr.trim()}`,
        );
        failed = String(c.name);
        break;
      }
    }
    // Init containers after a failed one have not run yet.
    for (const c of inits.slice(initStatuses.length)) {
      initStatuses.push({
        name: c.name as JsonValue,
        state: { waiting: { reason: 'PodInitializing' } },
        lastState: {},
        ready: false,
        restartCount: 0,
        image: c.image as JsonValue,
        imageID: '',
        started: false,
      });
    }
    const containers = arr(spec.containers);
    const prevStatuses = arr(prev.containerStatuses);
    const containerStatuses = containers.map((c) => {
      const before = prevStatuses.find((s) => s.name === c.name);
      const restartCount = Number(before?.restartCount ?? 0) + (how.restart ? 1 : 0);
      const lastState =
        how.lastState?.get(String(c.name)) ?? (isObject(before?.lastState) ? before.lastState : {});
      if (failed) {
        return {
          name: c.name as JsonValue,
          state: { waiting: { reason: 'PodInitializing' } },
          lastState,
          ready: false,
          restartCount,
          image: c.image as JsonValue,
          imageID: '',
          started: false,
        } as JsonObject;
      }
      return {
        name: c.name as JsonValue,
        state: { running: { startedAt: now } },
        lastState,
        ready: true,
        restartCount,
        image: c.image as JsonValue,
        imageID: '',
        containerID: containerId(`${namespace}/${name}/${String(c.name)}/${now}/${restartCount}`),
        started: true,
      } as JsonObject;
    });
    const ip = typeof prev.podIP === 'string' ? prev.podIP : this.allocateIp(pod);
    const ok = failed === undefined;
    const status: JsonObject = {
      phase: ok ? 'Running' : 'Pending',
      conditions: [
        condition('PodReadyToStartContainers', true, now),
        ok
          ? condition('Initialized', true, now)
          : condition(
              'Initialized',
              false,
              now,
              'ContainersNotInitialized',
              `containers with incomplete status: [${failed}]`,
            ),
        ok
          ? condition('Ready', true, now)
          : condition(
              'Ready',
              false,
              now,
              'ContainersNotReady',
              `containers with unready status: [${containers.map((c) => String(c.name)).join(' ')}]`,
            ),
        ok
          ? condition('ContainersReady', true, now)
          : condition(
              'ContainersReady',
              false,
              now,
              'ContainersNotReady',
              `containers with unready status: [${containers.map((c) => String(c.name)).join(' ')}]`,
            ),
        condition('PodScheduled', true, String((prev.startTime as string | undefined) ?? now)),
      ],
      hostIP: HOST_IP,
      hostIPs: [{ ip: HOST_IP }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: (prev.startTime as string | undefined) ?? now,
      containerStatuses,
      qosClass: 'BestEffort',
    };
    if (inits.length > 0) status.initContainerStatuses = initStatuses;
    pod.status = status;
    this.write(pod);
  }

  /** Whether exec into this container can start now (its state is running). */
  containerRunning(pod: JsonObject, container: string): boolean {
    const st = isObject(pod.status) ? pod.status : {};
    const cs = arr(st.containerStatuses).find((s) => s.name === container);
    return Boolean(cs && isObject(cs.state) && isObject(cs.state.running));
  }

  /** What answers an exec into `container` of `pod` (`hook`: the exec cost model's, for a simulated gateway). */
  exec(
    pod: JsonObject,
    container: string,
    argv: readonly string[],
    stdin: string,
    hook?: ToolHook,
  ): ExecOutcome | Promise<ExecOutcome> {
    if (this.options.backend && isGatewayPod(pod) && container === GATEWAY_CONTAINER)
      return this.options.backend.exec(pod, argv, stdin);
    const m = pod.metadata as JsonObject;
    const sim = this.sims.get(podKey(String(m.namespace), String(m.name)));
    if (sim && container === GATEWAY_CONTAINER) return sim.exec(argv, hook);
    return runBuiltin(argv, stdin);
  }

  /**
   * PID 1 of `container` died (exit 137): the kubelet reports it terminated and not ready, then, after
   * restartDelayMs, runs the init containers again and starts it with restartCount+1.
   */
  restartContainer(namespace: string, name: string, container: string): void {
    const current = this.stored(namespace, name);
    if (!current) return;
    const sim = this.sims.get(podKey(namespace, name));
    sim?.restart();
    const pod = clone(current);
    const now = this.now();
    const st = pod.status as JsonObject;
    const lastState = new Map<string, JsonObject>();
    for (const cs of arr(st.containerStatuses)) {
      if (cs.name !== container) continue;
      const startedAt = isObject(cs.state) && isObject(cs.state.running) ? cs.state.running.startedAt : now;
      const terminated: JsonObject = {
        exitCode: 137,
        reason: 'Error',
        startedAt: startedAt as JsonValue,
        finishedAt: now,
        containerID: cs.containerID as JsonValue,
      };
      cs.state = { terminated };
      cs.ready = false;
      cs.started = false;
      lastState.set(container, { terminated });
    }
    for (const c of arr(st.conditions)) {
      if (c.type === 'Ready' || c.type === 'ContainersReady') {
        c.status = 'False';
        c.reason = 'ContainersNotReady';
        c.message = `containers with unready status: [${container}]`;
        c.lastTransitionTime = now;
      }
    }
    this.write(pod);
    this.options.log(`pod ${namespace}/${name}: container ${container} killed (exit 137), restarting`);
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (this.closed) return;
      if (this.options.backend && isGatewayPod(pod))
        this.startOnBackend(namespace, name, { restart: true, lastState });
      else this.start(namespace, name, { restart: true, lastState });
    }, this.options.restartDelayMs);
    this.timers.add(t);
  }

  /**
   * After the local API restarts from its data directory every gateway pod gets a container restart, as
   * after a node reboot: a fresh simulator, restartCount+1, init containers run again.
   */
  resumeAfterLoad(): void {
    for (const pod of this.objects.store.list('/pods')) {
      const m = pod.metadata as JsonObject;
      const spec = pod.spec as JsonObject;
      if (!spec?.nodeName || m.deletionTimestamp) continue;
      const namespace = String(m.namespace);
      const name = String(m.name);
      if (!isGatewayPod(pod)) continue;
      if (!this.options.backend) this.createSim(pod);
      const lastState = terminatedByReboot(pod, this.now());
      if (this.options.backend) this.startOnBackend(namespace, name, { restart: true, lastState });
      else this.start(namespace, name, { restart: true, lastState });
    }
  }

  private deleteGracefully(pod: JsonObject, gracePeriodSeconds: number | undefined): JsonObject {
    const m = pod.metadata as JsonObject;
    const spec = pod.spec as JsonObject;
    const grace = gracePeriodSeconds ?? Number(spec.terminationGracePeriodSeconds ?? 30);
    let response = this.objects.present(this.def, pod);
    if (grace > 0 && !m.deletionTimestamp) {
      const marked = clone(pod);
      const mm = meta(marked);
      mm.deletionTimestamp = rfc3339(new Date(this.objects.clock().getTime() + grace * 1000));
      mm.deletionGracePeriodSeconds = grace;
      response = this.objects.present(this.def, this.write(marked));
    }
    // The local kubelet stops containers at once, so the pod is gone before the grace period ends.
    const stored = this.stored(String(m.namespace), String(m.name));
    if (stored) this.objects.remove(this.def, stored);
    return response;
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

function sortKeys(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (isObject(v)) {
    const out: JsonObject = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k] as JsonValue);
    return out;
  }
  return v;
}

/** Each container's last state after a node reboot: terminated (exit 255, Unknown) at `now`, started when it was. */
function terminatedByReboot(pod: JsonObject, now: string): Map<string, JsonObject> {
  const lastState = new Map<string, JsonObject>();
  for (const cs of arr((pod.status as JsonObject | undefined)?.containerStatuses)) {
    const running = isObject(cs.state) && isObject(cs.state.running) ? cs.state.running : undefined;
    lastState.set(String(cs.name), {
      terminated: {
        exitCode: 255,
        reason: 'Unknown',
        startedAt: (running?.startedAt as JsonValue) ?? now,
        finishedAt: now,
      },
    });
  }
  return lastState;
}
