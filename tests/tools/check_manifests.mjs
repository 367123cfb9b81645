// Checks Kubernetes manifests offline (scripts/check-manifests runs it over deploy/kubernetes/).
//
// Usage: node tests/tools/check_manifests.mjs [--pdserve BIN] FILE.yaml...
//
// Every YAML document of every file is read with `yaml` (a syntax error or a duplicate key
// fails) and checked:
// - a built-in kind against the API's schema in kubernetes-models (types, enums, required
//   fields), and every key against the field names of that kind's declared model (the schemas
//   allow unknown keys; the API server drops them, so a misspelled field would pass unnoticed);
// - a KEDA ScaledObject (keda.sh/v1alpha1) against KEDA's documented field names
//   (keda.sh/docs/2.18/reference/scaledobject-spec and .../scalers/prometheus);
// - any other apiVersion/kind is an error.
// Then across documents: one namespace; selectors that select; references to Deployments,
// Services, ServiceAccounts, Roles, Secrets, claims and volumes that resolve (the Secrets and
// claims the operator creates are listed in OPERATOR_PROVIDED); $(VAR) in args defined in env;
// pdserve's ports declared as containerPorts; every pdserve pod scraped (prometheus.io
// annotations naming its /metrics port, a worker's --metrics-address beyond loopback); one
// --model everywhere; the planner's MIN:MAX
// against the reserved replicas and KEDA's maxReplicaCount. With --pdserve, each pdserve
// container's flags must be listed by `BIN SUBCOMMAND --help`.
//
// Prints each failure as `FILE: doc N (Kind/name): PATH: what` (N counts from 1) and exits 1;
// otherwise prints one summary line.

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const NODE_MODULES = join(dirname(fileURLToPath(import.meta.url)), "node_modules");

// Created by the operator (deploy/kubernetes/README.md), not by these files.
const OPERATOR_PROVIDED = {
  Secret: ["pdserve-cluster-token", "pdserve-api-keys"],
  PersistentVolumeClaim: ["pdserve-models"],
};
// Flags being added to `pdserve gateway`: skipped, with a note, while its --help lacks them.
const PENDING_FLAGS = { gateway: ["--actuator", "--kubernetes-deployments"] };
const PDSERVE_SUBCOMMANDS = ["gateway", "prefill", "decode"];
const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding",
  "PersistentVolume", "StorageClass", "PriorityClass", "CustomResourceDefinition"]);

const failures = [];
const notes = new Set();

function fail(doc, path, what) {
  const id = !doc ? "(all files)" : `${doc.file}: doc ${doc.index + 1}` + (doc.obj
    ? ` (${doc.obj.kind ?? "?"}/${doc.obj.metadata?.name ?? "?"})` : "");
  failures.push({ file: doc?.file ?? "\uffff", index: doc?.index ?? 0,
    text: `${id}: ${path || "."}: ${what}` });
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const typeName = (v) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

// --- Field names of kubernetes-models' declared models (.d.ts) ------------------------------

const interfaces = new Map();  // .d.ts path -> Map(field -> {ref, array}) or null (no interface)

// Reads `export interface IName { "field"?: Type; ... }` from a model's .d.ts: each field with
// the .d.ts of its type where that is another model (alone or in Array<>), null where it is a
// primitive, a union or a map.
function modelFields(dts) {
  if (interfaces.has(dts)) return interfaces.get(dts);
  let fields = null;
  if (existsSync(dts)) {
    const text = readFileSync(dts, "utf8");
    const imports = new Map();
    for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
      const spec = m[2].replace(/\.js$/, "");
      imports.set(m[1], spec.startsWith(".") ? resolve(dirname(dts), `${spec}.d.ts`)
        : join(NODE_MODULES, `${spec}.d.ts`));
    }
    const body = text.match(/^export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}$/m);
    if (!body && /^export interface /m.test(text)) {
      throw new Error(`cannot read the fields of ${dts}: has kubernetes-models' layout changed?`);
    }
    if (body) {
      fields = new Map();
      for (const m of body[1].matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
        const type = m[2].replace(/;$/, "");
        const ref = type.match(/^(Array<)?(\w+)>?$/);
        fields.set(m[1], ref && imports.has(ref[2])
          ? { ref: imports.get(ref[2]), array: Boolean(ref[1]) } : null);
      }
    }
  }
  interfaces.set(dts, fields);
  return fields;
}

function checkFieldNames(doc, value, dts, path) {
  const fields = modelFields(dts);
  if (!fields || !isObject(value)) return;
  for (const [key, v] of Object.entries(value)) {
    const where = path ? `${path}.${key}` : key;
    if (!fields.has(key)) {
      fail(doc, where, `unknown field "${key}" (not in the API's ${dts.split("/").pop()
        .replace(".d.ts", "")})`);
      continue;
    }
    const f = fields.get(key);
    if (!f) continue;
    if (!f.array) {
      checkFieldNames(doc, v, f.ref, where);
    } else if (Array.isArray(v)) {
      v.forEach((e, i) => checkFieldNames(doc, e, f.ref, `${where}[${i}]`));
    }
  }
}

// --- Built-in kinds ---------------------------------------------------------------------------

async function checkBuiltin(doc) {
  const { apiVersion, kind } = doc.obj;  // kubernetes-models/v1 is the core group
  let model;
  try {
    model = (await import(`kubernetes-models/${apiVersion}`))[kind];
  } catch {
    model = undefined;
  }
  if (typeof model !== "function" || model.kind !== kind) {
    return fail(doc, "kind", `unknown apiVersion/kind ${apiVersion}/${kind} (neither a built-in ` +
      "kind of kubernetes-models nor KEDA's ScaledObject)");
  }
  try {
    new model(doc.obj).validate();
  } catch (e) {
    for (const err of e.errors ?? [{ instancePath: "", message: e.message }]) {
      const path = err.instancePath.replace(/^\//, "").replace(/\/(\d+)(?=\/|$)/g, "[$1]")
        .replaceAll("/", ".");
      const extra = err.params?.allowedValues ? ` (${err.params.allowedValues.join(", ")})` : "";
      fail(doc, path, `${err.message}${extra}`);
    }
  }
  const dts = join(NODE_MODULES, "kubernetes-models", apiVersion, `${kind}.d.ts`);
  checkFieldNames(doc, doc.obj, dts, "");
}

// --- KEDA ScaledObject (keda.sh/v1alpha1) -------------------------------------------------------

// KEDA's field names (its docs' ScaledObject specification, 2.15 to 2.18). `int`, `string`,
// `bool`: the type; an object: its fields; [object]: a list of those; the rest: named below.
const KEDA_SCALED_OBJECT = {
  apiVersion: "string", kind: "string", metadata: "object-meta",
  spec: {
    scaleTargetRef: { apiVersion: "string", kind: "string", name: "string",
      envSourceContainerName: "string" },
    pollingInterval: "int", cooldownPeriod: "int", initialCooldownPeriod: "int",
    idleReplicaCount: "int", minReplicaCount: "int", maxReplicaCount: "int",
    fallback: { failureThreshold: "int", replicas: "int", behavior: "string" },
    advanced: {
      restoreToOriginalReplicaCount: "bool",
      horizontalPodAutoscalerConfig: { name: "string", behavior: "hpa-behavior" },
      scalingModifiers: { target: "string", activationTarget: "string", metricType: "string",
        formula: "string" },
    },
    triggers: [{ type: "string", name: "string", metadata: "string-map",
      useCachedMetrics: "bool", authenticationRef: { name: "string", kind: "string" },
      metricType: "string" }],
  },
};
const KEDA_REQUIRED = [["spec"], ["spec", "scaleTargetRef"], ["spec", "scaleTargetRef", "name"],
  ["spec", "triggers"]];
// The prometheus scaler's metadata (keda.sh/docs/2.18/scalers/prometheus): all strings.
const PROMETHEUS_METADATA = { required: ["serverAddress", "query", "threshold"],
  optional: ["activationThreshold", "namespace", "customHeaders", "ignoreNullValues",
    "queryParameters", "unsafeSsl", "timeout", "authModes"] };

async function checkShape(doc, value, shape, path) {
  if (shape === "object-meta") {
    return checkFieldNames(doc, value, join(NODE_MODULES,
      "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta.d.ts"), path);
  }
  if (shape === "int" || shape === "string" || shape === "bool") {
    const ok = shape === "int" ? Number.isInteger(value)
      : typeof value === (shape === "bool" ? "boolean" : "string");
    if (!ok) fail(doc, path, `must be ${shape === "int" ? "an integer" : `a ${shape}`}, got ` +
      `${typeName(value)} ${JSON.stringify(value)}`);
    return;
  }
  if (shape === "string-map") {
    if (!isObject(value)) return fail(doc, path, "must be a map of strings");
    for (const [k, v] of Object.entries(value)) {
      if (typeof v !== "string") fail(doc, `${path}.${k}`, `must be a string (KEDA's metadata ` +
        `is a map of strings: quote it), got ${typeName(v)} ${JSON.stringify(v)}`);
    }
    return;
  }
  if (shape === "hpa-behavior") {
    const { HorizontalPodAutoscalerBehavior } = await import("kubernetes-models/autoscaling/v2");
    try {
      new HorizontalPodAutoscalerBehavior(value).validate();
    } catch (e) {
      for (const err of e.errors ?? []) {
        fail(doc, path + err.instancePath.replaceAll("/", "."), err.message);
      }
    }
    return checkFieldNames(doc, value, join(NODE_MODULES,
      "kubernetes-models/autoscaling/v2/HorizontalPodAutoscalerBehavior.d.ts"), path);
  }
  if (Array.isArray(shape)) {
    if (!Array.isArray(value)) return fail(doc, path, `must be a list, got ${typeName(value)}`);
    for (const [i, v] of value.entries()) await checkShape(doc, v, shape[0], `${path}[${i}]`);
    return;
  }
  if (!isObject(value)) return fail(doc, path, `must be an object, got ${typeName(value)}`);
  for (const [k, v] of Object.entries(value)) {
    const where = path ? `${path}.${k}` : k;
    if (!(k in shape)) fail(doc, where, `unknown field "${k}" (KEDA's fields here: ` +
      `${Object.keys(shape).join(", ")})`);
    else await checkShape(doc, v, shape[k], where);
  }
}

async function checkScaledObject(doc) {
  const o = doc.obj;
  await checkShape(doc, o, KEDA_SCALED_OBJECT, "");
  for (const path of KEDA_REQUIRED) {
    let v = o;
    for (const k of path) v = isObject(v) ? v[k] : undefined;
    if (v === undefined) {
      fail(doc, path.join("."), "required");
      break;
    }
  }
  const spec = isObject(o.spec) ? o.spec : {};
  if (Array.isArray(spec.triggers) && spec.triggers.length === 0) {
    fail(doc, "spec.triggers", "needs at least one trigger");
  }
  for (const [i, t] of (Array.isArray(spec.triggers) ? spec.triggers : []).entries()) {
    const path = `spec.triggers[${i}]`;
    if (!isObject(t)) continue;
    if (t.type === undefined) fail(doc, `${path}.type`, "required");
    if (t.metadata === undefined) fail(doc, `${path}.metadata`, "required");
    const metricTypes = ["AverageValue", "Value", "Utilization"];
    if (t.metricType !== undefined && !metricTypes.includes(t.metricType)) {
      fail(doc, `${path}.metricType`, "must be AverageValue, Value or Utilization");
    }
    if (t.type === "prometheus" && isObject(t.metadata)) {
      for (const k of PROMETHEUS_METADATA.required) {
        if (!(k in t.metadata)) {
          fail(doc, `${path}.metadata.${k}`, "required by the prometheus scaler");
        }
      }
      for (const k of Object.keys(t.metadata)) {
        if (![...PROMETHEUS_METADATA.required, ...PROMETHEUS_METADATA.optional].includes(k)) {
          fail(doc, `${path}.metadata.${k}`, `not a prometheus scaler parameter`);
        }
      }
      for (const k of ["threshold", "activationThreshold"]) {
        const v = t.metadata[k];
        if (typeof v === "string" && (v.trim() === "" || !Number.isFinite(Number(v)))) {
          fail(doc, `${path}.metadata.${k}`,
            `must be a number in a string, got "${t.metadata[k]}"`);
        }
      }
    }
  }
  const { minReplicaCount: min = 0, maxReplicaCount: max = 100, idleReplicaCount: idle } = spec;
  if (Number.isInteger(min) && Number.isInteger(max) && min > max) {
    fail(doc, "spec.minReplicaCount", `${min} is above maxReplicaCount ${max}`);
  }
  if (Number.isInteger(idle) && idle >= min) {
    fail(doc, "spec.idleReplicaCount", "must be below minReplicaCount");
  }
}

// --- pdserve's flags ----------------------------------------------------------------------------

const helpFlags = new Map();  // subcommand -> Set of flags its --help lists

function flagsOf(bin, sub) {
  if (!helpFlags.has(sub)) {
    const help = execFileSync(bin, [sub, "--help"], { encoding: "utf8" });
    helpFlags.set(sub, new Set([...help.matchAll(/^\s+(?:-\w,)?(--[\w-]+)/gm)].map((m) => m[1])));
  }
  return helpFlags.get(sub);
}

// A pdserve container: its subcommand (the image's ENTRYPOINT is pdserve) and its flags, each
// with the value that follows it (undefined for a switch followed by another flag).
function pdserveInvocation(container) {
  const argv = [...(container.command ?? []), ...(container.args ?? [])].map(String);
  if (argv[0] && argv[0].split("/").pop() === "pdserve") argv.shift();
  if (!PDSERVE_SUBCOMMANDS.includes(argv[0])) return null;
  const flags = [];
  for (let i = 1; i < argv.length; i++) {
    if (!argv[i].startsWith("--")) continue;
    const [name, inline] = argv[i].split(/=(.*)/s);
    const next = argv[i + 1];
    const value = inline ?? (next !== undefined && !next.startsWith("--") ? next : undefined);
    flags.push({ name, index: i, value });
  }
  return { sub: argv[0], flags, get: (n) => flags.find((f) => f.name === n)?.value };
}

// --- Across documents ---------------------------------------------------------------------------

const PROVIDED = " (nor one the operator creates)";

const POD_OWNERS = new Set(["Deployment", "StatefulSet"]);

function podSpecs(docs) {
  return docs.filter((d) => POD_OWNERS.has(d.obj.kind) && isObject(d.obj.spec?.template?.spec))
    .map((d) => ({ doc: d, spec: d.obj.spec.template.spec, base: "spec.template.spec" }));
}

function index(docs) {
  const named = (kind, name) =>
    docs.find((d) => d.obj.kind === kind && d.obj.metadata?.name === name);
  const exists = (kind, name) =>
    Boolean(named(kind, name)) || (OPERATOR_PROVIDED[kind] ?? []).includes(name);
  return { docs, named, exists };
}

// One namespace for all (a RoleBinding's subject and KEDA's target must share it): the one most
// documents name.
function checkNamespaces({ docs }) {
  const namespaced = docs.filter((d) => !CLUSTER_SCOPED.has(d.obj.kind));
  const count = new Map();
  for (const d of namespaced) {
    const ns = d.obj.metadata?.namespace;
    count.set(ns, (count.get(ns) ?? 0) + 1);
  }
  const namespace = [...count.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  for (const d of namespaced) {
    const ns = d.obj.metadata?.namespace;
    if (ns !== namespace) {
      fail(d, "metadata.namespace",
        `${ns ?? "not set"}, but the others use ${namespace ?? "none"}`);
    }
  }
}

// Selectors, service accounts, volumes (a StatefulSet's claim templates among them), Secrets and
// $(VAR) of every Deployment's and StatefulSet's pods; returns their pdserve containers.
function checkPods({ docs, exists }) {
  const pdserve = [];
  for (const d of docs.filter((x) => POD_OWNERS.has(x.obj.kind))) {
    const have = d.obj.spec?.template?.metadata?.labels ?? {};
    for (const [k, v] of Object.entries(d.obj.spec?.selector?.matchLabels ?? {})) {
      if (have[k] !== v) {
        fail(d, `spec.selector.matchLabels.${k}`, `the pod template's is ${have[k] ?? "absent"}`);
      }
    }
  }
  for (const { doc, spec, base } of podSpecs(docs)) {
    const sa = spec.serviceAccountName;
    if (sa && sa !== "default" && !exists("ServiceAccount", sa)) {
      fail(doc, `${base}.serviceAccountName`, `no ServiceAccount ${sa}`);
    }
    const volumes = new Set((doc.obj.spec.volumeClaimTemplates ?? [])
      .map((t) => t.metadata?.name));
    for (const [i, v] of (spec.volumes ?? []).entries()) {
      volumes.add(v.name);
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim && !exists("PersistentVolumeClaim", claim)) {
        fail(doc, `${base}.volumes[${i}].persistentVolumeClaim.claimName`,
          `no PersistentVolumeClaim ${claim}${PROVIDED}`);
      }
      const secret = v.secret?.secretName;
      if (secret && !exists("Secret", secret)) {
        fail(doc, `${base}.volumes[${i}].secret.secretName`, `no Secret ${secret}${PROVIDED}`);
      }
    }
    for (const [ci, c] of (spec.containers ?? []).entries()) {
      const path = `${base}.containers[${ci}]`;
      for (const [mi, m] of (c.volumeMounts ?? []).entries()) {
        if (!volumes.has(m.name)) {
          fail(doc, `${path}.volumeMounts[${mi}].name`, `no volume ${m.name}`);
        }
      }
      const env = new Set((c.env ?? []).map((e) => e.name));
      for (const [ei, e] of (c.env ?? []).entries()) {
        const secret = e.valueFrom?.secretKeyRef?.name;
        if (secret && !exists("Secret", secret)) {
          fail(doc, `${path}.env[${ei}].valueFrom.secretKeyRef.name`,
            `no Secret ${secret}${PROVIDED}`);
        }
      }
      for (const field of ["command", "args"]) {
        for (const [ai, a] of (c[field] ?? []).entries()) {
          for (const m of String(a).matchAll(/(?<!\$)\$\(([\w.-]+)\)/g)) {
            if (!env.has(m[1])) {
              fail(doc, `${path}.${field}[${ai}]`,
                `$(${m[1]}) is not in the container's env (it would stay as typed)`);
            }
          }
        }
      }
      const inv = pdserveInvocation(c);
      if (inv) pdserve.push({ doc, path, container: c, inv });
    }
  }
  return pdserve;
}

// pdserve's flags against its --help, its ports against containerPorts, one model, the workers'
// gateway address, and the planner's Deployments and limits.
function checkPdserve({ docs, named }, pdserve, pdserveBin) {
  const models = new Set();
  for (const { doc, path, container, inv } of pdserve) {
    if (pdserveBin) {
      const listed = flagsOf(pdserveBin, inv.sub);
      for (const f of inv.flags.filter((x) => !listed.has(x.name))) {
        if ((PENDING_FLAGS[inv.sub] ?? []).includes(f.name)) {
          notes.add(`note: ${f.name} is not in \`pdserve ${inv.sub} --help\` yet (being added); ` +
            "not checked");
        } else {
          fail(doc, `${path}.${container.command ? "command+args" : "args"}[${f.index}]`,
            `pdserve ${inv.sub} has no flag ${f.name} (\`${pdserveBin} ${inv.sub} --help\`)`);
        }
      }
    }
    const ports = new Set((container.ports ?? []).map((p) => String(p.containerPort)));
    const portFlags = { gateway: ["--port", "--control-port"], decode: ["--kv-port"] };
    for (const flag of portFlags[inv.sub] ?? []) {
      const v = inv.get(flag);
      if (v !== undefined && v !== "0" && !ports.has(v)) {
        fail(doc, `${path}.ports`, `${flag} ${v} is not declared as a containerPort`);
      }
    }
    checkScrape(doc, path, inv, ports);
    models.add(inv.get("--model") ?? "(built-in tiny: no --model)");
    const gw = inv.get("--gateway");
    if (gw) {
      const [host, port] = gw.split(":");
      const svc = named("Service", host.split(".")[0]);
      if (!svc) fail(doc, path, `--gateway ${gw}: no Service ${host}`);
      else if (!(svc.obj.spec?.ports ?? []).some((p) => String(p.port) === port)) {
        fail(doc, path, `--gateway ${gw}: Service ${host} has no port ${port}`);
      }
    }
    if (inv.sub === "gateway") checkPlanner({ docs, named }, doc, path, inv);
  }
  if (models.size > 1) {
    fail(null, "", `pdserve containers name different models: ${[...models].join(", ")}`);
  }
}

// Prometheus scrapes a pdserve pod by its template's prometheus.io annotations: they must be
// there and name the port its /metrics serves (the gateway's --port, a worker's
// --metrics-port), declared as a containerPort; a worker's /metrics must listen beyond the pod's
// loopback (--metrics-address; its default is 127.0.0.1).
function checkScrape(doc, path, inv, ports) {
  const metricsPort = inv.sub === "gateway" ? inv.get("--port") ?? "8000" : inv.get("--metrics-port");
  if (metricsPort === undefined || metricsPort === "-1") {
    fail(doc, path, `pdserve ${inv.sub} serves no /metrics (--metrics-port): Prometheus cannot ` +
      "scrape it");
    return;
  }
  const annotations = doc.obj.spec?.template?.metadata?.annotations ?? {};
  const where = "spec.template.metadata.annotations";
  if (annotations["prometheus.io/scrape"] !== "true") {
    fail(doc, `${where}["prometheus.io/scrape"]`, "not \"true\": its /metrics is not scraped");
  }
  if (annotations["prometheus.io/port"] !== metricsPort) {
    fail(doc, `${where}["prometheus.io/port"]`,
      `${annotations["prometheus.io/port"] ?? "absent"}, but /metrics is on ${metricsPort}`);
  }
  if (!ports.has(metricsPort)) {
    fail(doc, `${path}.ports`, `/metrics port ${metricsPort} is not declared as a containerPort`);
  }
  if (inv.sub !== "gateway") {
    const address = inv.get("--metrics-address") ?? "127.0.0.1";
    if (/^127\.|^localhost$|^::1$/.test(address)) {
      fail(doc, path, `--metrics-address ${address}: /metrics listens on the pod's loopback, ` +
        "where Prometheus cannot reach it (0.0.0.0)");
    }
  }
}

// The Deployments the planner scales exist; each pool's reserved replicas are its MIN and KEDA's
// maxReplicaCount its MAX - MIN.
function checkPlanner({ docs, named }, doc, path, inv) {
  const prefix = inv.get("--kubernetes-deployments") ?? "pdserve";
  for (const pool of ["prefill", "decode"]) {
    const burst = `${prefix}-${pool}-burst`;
    if (inv.get("--actuator") === "kubernetes" && !named("Deployment", burst)) {
      fail(doc, path, `the planner scales Deployment ${burst}, which no file defines`);
    }
    const limits = (inv.get(`--planner-${pool}`) ?? "1:4").split(":").map(Number);
    const [min, max] = limits;
    const reserved = named("Deployment", `${prefix}-${pool}-reserved`);
    const replicas = reserved?.obj.spec?.replicas ?? 1;
    if (reserved && Number.isInteger(replicas) && replicas !== min) {
      fail(reserved, "spec.replicas", `${replicas}, but the gateway's --planner-${pool} ` +
        `${limits.join(":")} counts ${min} reserved worker(s)`);
    }
    for (const so of docs.filter((d) => d.obj.kind === "ScaledObject" &&
      d.obj.spec?.scaleTargetRef?.name === burst)) {
      const most = so.obj.spec.maxReplicaCount ?? 100;
      if (most !== max - min) {
        fail(so, "spec.maxReplicaCount", `${most}, but the gateway's --planner-${pool} ` +
          `${limits.join(":")} allows ${max - min} burst worker(s)`);
      }
    }
  }
}

function checkServices({ docs }) {
  for (const d of docs.filter((x) => x.obj.kind === "Service" && x.obj.spec?.selector)) {
    const selector = Object.entries(d.obj.spec.selector);
    const target = podSpecs(docs).find(({ doc }) =>
      selector.every(([k, v]) => doc.obj.spec.template.metadata?.labels?.[k] === v));
    if (!target) {
      fail(d, "spec.selector", "selects no Deployment's or StatefulSet's pods");
      continue;
    }
    const ports = new Set((target.spec.containers ?? []).flatMap((c) => (c.ports ?? [])
      .flatMap((p) => [p.name, String(p.containerPort)])));
    for (const [i, p] of (d.obj.spec.ports ?? []).entries()) {
      const t = String(p.targetPort ?? p.port);
      if (!ports.has(t)) {
        fail(d, `spec.ports[${i}].targetPort`,
          `${t} is not a port of ${target.doc.obj.metadata.name}'s containers`);
      }
    }
  }
}

function checkRbacAndKeda({ docs, named }) {
  for (const d of docs.filter((x) => x.obj.kind === "Role")) {
    for (const [ri, r] of (d.obj.rules ?? []).entries()) {
      if (!(r.apiGroups ?? []).includes("apps")) continue;
      if (!(r.resources ?? []).some((x) => x.startsWith("deployments"))) continue;
      for (const [ni, n] of (r.resourceNames ?? []).entries()) {
        if (!named("Deployment", n)) {
          fail(d, `rules[${ri}].resourceNames[${ni}]`, `no Deployment ${n}`);
        }
      }
    }
  }
  for (const d of docs.filter((x) => x.obj.kind === "RoleBinding")) {
    const ref = d.obj.roleRef ?? {};
    if (ref.kind === "Role" && !named("Role", ref.name)) {
      fail(d, "roleRef.name", `no Role ${ref.name}`);
    }
    for (const [si, s] of (d.obj.subjects ?? []).entries()) {
      if (s.kind !== "ServiceAccount") continue;
      if (!named("ServiceAccount", s.name)) {
        fail(d, `subjects[${si}].name`, `no ServiceAccount ${s.name}`);
      }
      const ns = d.obj.metadata?.namespace;
      if (s.namespace !== ns) {
        fail(d, `subjects[${si}].namespace`, `${s.namespace ?? "not set"}, but the ` +
          `ServiceAccount is in ${ns ?? "no namespace"} (a ServiceAccount subject needs it)`);
      }
    }
  }
  for (const d of docs.filter((x) => x.obj.kind === "ScaledObject")) {
    const ref = d.obj.spec?.scaleTargetRef;
    if (!ref?.name || (ref.kind ?? "Deployment") !== "Deployment") continue;
    if (!named("Deployment", ref.name)) {
      fail(d, "spec.scaleTargetRef.name", `no Deployment ${ref.name}`);
    }
  }
}

function crossCheck(docs, pdserveBin) {
  const idx = index(docs);
  checkNamespaces(idx);
  checkPdserve(idx, checkPods(idx), pdserveBin);
  checkServices(idx);
  checkRbacAndKeda(idx);
}

// --- Main ---------------------------------------------------------------------------------------

async function main(argv) {
  let pdserveBin = null;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--pdserve") pdserveBin = argv[++i];
    else files.push(argv[i]);
  }
  if (files.length === 0) {
    console.error("usage: node check_manifests.mjs [--pdserve BIN] FILE.yaml...");
    return 2;
  }
  const docs = [];
  for (const file of files) {
    const parsed = parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: true });
    for (const [index, ydoc] of (Array.isArray(parsed) ? parsed : [parsed]).entries()) {
      const doc = { file, index, obj: null };
      if (ydoc.errors.length) {
        for (const e of ydoc.errors) {
          fail(doc, "", `YAML: ${e.message.split("\n")[0].replace(/:$/, "")}`);
        }
        continue;
      }
      doc.obj = ydoc.toJS();
      if (doc.obj === null || doc.obj === undefined) continue;  // an empty document
      const { apiVersion, kind } = isObject(doc.obj) ? doc.obj : {};
      if (typeof apiVersion !== "string" || typeof kind !== "string") {
        fail(doc, "", "not a Kubernetes object (apiVersion and kind, strings)");
        continue;
      }
      docs.push(doc);
    }
  }
  for (const doc of docs) {
    if (!doc.obj.metadata?.name) fail(doc, "metadata.name", "required");
    if (doc.obj.apiVersion === "keda.sh/v1alpha1" && doc.obj.kind === "ScaledObject") {
      await checkScaledObject(doc);
    } else {
      await checkBuiltin(doc);
    }
  }
  crossCheck(docs, pdserveBin);
  for (const n of notes) console.log(n);
  if (failures.length) {
    failures.sort((a, b) => a.file.localeCompare(b.file) || a.index - b.index);  // stable
    for (const f of failures) console.error(f.text);
    console.error(`check-manifests: ${failures.length} failure(s) in ${files.length} file(s)`);
    return 1;
  }
  const kinds = [...new Set(docs.map((d) => d.obj.kind))].sort().join(", ");
  console.log(`check-manifests: ${docs.length} documents in ${files.length} files OK (${kinds}; ` +
    `pdserve flags ${pdserveBin ? `checked against ${pdserveBin}` : "not checked: no binary"})`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
