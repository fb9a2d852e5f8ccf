#!/usr/bin/python3
"""k8s_check.py SCHEMA DIR... — llmc's Kubernetes artifacts against the
operators' recorded schemas (tests/emitters/k8s_schema.json, from
k8s_schema_gen.py; the source commits are in its "sources").

For each DIR holding them:
  slinky-nodeset.yaml       the Slinky NodeSet CRD's openAPIV3Schema; the parts
                            it leaves open (spec.slurmd, spec.template.spec) as
                            core/v1 Container and the PodSpec fields llmc writes
  slinky-values.yaml        the slurm chart's value names (its values.yaml), the
                            slurmd container and podSpec typed as above, and the
                            same node set, container and pod as slinky-nodeset.yaml
  soperator-nodeset.yaml    the Soperator NodeSet CRD's openAPIV3Schema
  soperator-partition.yaml  a merge patch: the SlurmCluster's spec keys and its
                            partitionConfiguration schema
and the batch script beside them asks for the GRES, partition and node count
that the artifacts create. Object names are DNS-1123 names.

--self-test DIR: every file of DIR passes, then each of a list of violations
introduced on purpose (a wrong type, an unknown field, a bad quantity, a
missing required field, a bad name, a mismatch with the script) must fail.
Prints ok/FAIL lines and "N passed, N failed".
"""
import copy
import glob
import json
import os
import re
import sys

import yaml

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Schemas:
    def __init__(self, path):
        d = json.load(open(path))
        self.crds = d["crds"]
        self.core = d["core"]
        self.helm = d["helm"]["slurm"]
        self.sources = d["sources"]
        core = self.core
        volume = copy.deepcopy(core["VolumeSource"])
        volume["properties"]["name"] = {"type": "string"}
        volume["required"] = sorted(set(volume.get("required", [])) | {"name"})
        # The PodSpec fields llmc writes, typed from core/v1 (an unknown one is an error).
        self.podspec = {"type": "object", "properties": {
            "hostname": {"type": "string"},
            "hostNetwork": {"type": "boolean"},
            "dnsPolicy": {"type": "string", "enum": ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"]},
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "tolerations": {"type": "array", "items": core["Toleration"]},
            "volumes": {"type": "array", "items": volume},
        }}
        self.container = core["Container"]


def validate(v, s, path, errs):
    """Structural validation the way the API server does it, strict on unknown fields."""
    if v is None:
        if not s.get("nullable"):
            errs.append("%s: null" % path)
        return
    if s.get("x-kubernetes-int-or-string"):
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            errs.append("%s: must be an integer or a string, found %r" % (path, v))
            return
        if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
            errs.append("%s: %r does not match %s" % (path, v, s["pattern"]))
        return
    t = s.get("type")
    if t == "object" or (t is None and ("properties" in s or "additionalProperties" in s)):
        if not isinstance(v, dict):
            errs.append("%s: must be an object, found %r" % (path, v))
            return
        props = s.get("properties", {})
        addl = s.get("additionalProperties")
        for k, x in v.items():
            if k in props:
                validate(x, props[k], "%s.%s" % (path, k), errs)
            elif isinstance(addl, dict):
                validate(x, addl, "%s.%s" % (path, k), errs)
            elif not s.get("x-kubernetes-preserve-unknown-fields") and (props or addl is not None or t == "object"):
                if props or addl is not None:
                    errs.append("%s: unknown field %r" % (path, k))
        for r in s.get("required", []):
            if r not in v:
                errs.append("%s: missing required field %r" % (path, r))
        return
    if t == "array":
        if not isinstance(v, list):
            errs.append("%s: must be a list, found %r" % (path, v))
            return
        for i, x in enumerate(v):
            validate(x, s.get("items", {}), "%s[%d]" % (path, i), errs)
        return
    if t == "string":
        if not isinstance(v, str):
            errs.append("%s: must be a string, found %r" % (path, v))
            return
        if "enum" in s and v not in s["enum"]:
            errs.append("%s: %r is not one of %s" % (path, v, s["enum"]))
        if "pattern" in s and not re.search(s["pattern"], v):
            errs.append("%s: %r does not match %s" % (path, v, s["pattern"]))
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append("%s: longer than %d" % (path, s["maxLength"]))
        return
    if t == "integer":
        if isinstance(v, bool) or not isinstance(v, int):
            errs.append("%s: must be an integer, found %r" % (path, v))
            return
        lo = s.get("minimum", -2**31 if s.get("format") == "int32" else None)
        hi = s.get("maximum", 2**31 - 1 if s.get("format") == "int32" else None)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            errs.append("%s: %d out of range" % (path, v))
        return
    if t == "boolean":
        if not isinstance(v, bool):
            errs.append("%s: must be true or false, found %r" % (path, v))
        return
    if t == "number":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            errs.append("%s: must be a number, found %r" % (path, v))
        return
    if "anyOf" in s:
        sub = []
        for alt in s["anyOf"]:
            e = []
            validate(v, alt, path, e)
            if not e:
                return
            sub += e
        errs.append("%s: matches none of anyOf (%s)" % (path, "; ".join(sub)))


def keys_only(v, tree, path, errs):
    """Value names: every key of v is one the chart's values.yaml has."""
    if tree is None or not isinstance(v, dict):
        return
    for k, x in v.items():
        if k not in tree:
            errs.append("%s: the chart has no value %r" % (path, k))
        else:
            keys_only(x, tree[k], "%s.%s" % (path, k), errs)


def check_meta(doc, errs, path="metadata"):
    m = doc.get("metadata", {})
    if not isinstance(m, dict) or not DNS_SUBDOMAIN.match(str(m.get("name", ""))) or len(str(m.get("name", ""))) > 253:
        errs.append("%s.name: %r is not a DNS-1123 subdomain" % (path, m.get("name") if isinstance(m, dict) else m))
    if isinstance(m, dict) and "namespace" in m and not (DNS_LABEL.match(str(m["namespace"])) and len(m["namespace"]) <= 63):
        errs.append("%s.namespace: %r is not a DNS-1123 label" % (path, m["namespace"]))


def check_crd(doc, S, key, errs):
    want = key.rsplit("/", 1)
    api, kind = want[0], want[1]
    if doc.get("apiVersion") != api or doc.get("kind") != kind:
        errs.append("apiVersion/kind: %r/%r, want %s/%s" % (doc.get("apiVersion"), doc.get("kind"), api, kind))
        return
    validate(doc, S.crds[key], "", errs)
    check_meta(doc, errs)


def check_slinky_nodeset(doc, S, errs):
    check_crd(doc, S, "slinky.slurm.net/v1beta1/NodeSet", errs)
    spec = doc.get("spec") or {}
    validate(spec.get("slurmd"), S.container, ".spec.slurmd", errs)
    validate((spec.get("template") or {}).get("spec"), S.podspec, ".spec.template.spec", errs)


def check_slinky_values(doc, S, errs):
    h = S.helm
    for k in doc:
        if k not in h["top"]:
            errs.append("values: the chart has no value %r" % k)
    keys_only(doc.get("controller"), h["controller"], "controller", errs)
    validate(doc.get("configFiles", {}), {"type": "object", "additionalProperties": {"type": "string"}}, "configFiles", errs)
    for name, ns in (doc.get("nodesets") or {}).items():
        if not (DNS_LABEL.match(name) and len(name) <= 63):
            errs.append("nodesets.%s: not a DNS-1123 label" % name)
        keys_only(ns, {k: (None if k in ("slurmd", "podSpec") else v) for k, v in h["nodeset"].items()}, "nodesets." + name, errs)
        sd = dict(ns.get("slurmd") or {})
        for k in sd:
            if k not in h["nodeset"]["slurmd"]:
                errs.append("nodesets.%s.slurmd: the chart has no value %r" % (name, k))
        sd["name"] = "slurmd"
        validate(sd, S.container, "nodesets.%s.slurmd" % name, errs)
        validate(ns.get("podSpec"), S.podspec, "nodesets.%s.podSpec" % name, errs)
        validate(ns.get("replicas"), {"type": "integer", "format": "int32"}, "nodesets.%s.replicas" % name, errs)
    for name, p in (doc.get("partitions") or {}).items():
        keys_only(p, h["partition"], "partitions." + name, errs)


def check_soperator_patch(doc, S, errs):
    for k in doc:
        if k != "spec":
            errs.append("patch: unexpected top-level field %r" % k)
    spec = doc.get("spec") or {}
    keys = S.crds["slurm.nebius.ai/v1/SlurmCluster#spec-keys"]
    for k in spec:
        if k not in keys:
            errs.append("spec: SlurmCluster has no field %r" % k)
    if "partitionConfiguration" in spec:
        validate(spec["partitionConfiguration"], S.crds["slurm.nebius.ai/v1/SlurmCluster#partitionConfiguration"],
                 "spec.partitionConfiguration", errs)


def script_asks(d):
    """(gres, partition, nodes) from the batch script's #SBATCH lines."""
    out = {}
    for f in glob.glob(os.path.join(d, "*.slurm")):
        for line in open(f):
            m = re.match(r"#SBATCH --(gres|partition|nodes|time)=(\S+)", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def quantity_bytes(q):
    """A Kubernetes memory quantity in bytes (the suffixes llmc writes), None when not one."""
    m = re.fullmatch(r"([0-9]+)(Ei|Pi|Ti|Gi|Mi|Ki|E|P|T|G|M|k)?", str(q))
    if not m:
        return None
    mul = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
    return int(m.group(1)) * mul.get(m.group(2) or "", 1)


def slurm_seconds(t):
    """[D-]HH:MM:SS -> seconds."""
    d, _, hms = t.rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return (int(d) if d else 0) * 86400 + h * 3600 + m * 60 + sec


def check_partition_line(config, asks, where, e):
    """The partition is the site's: not made the default, and its MaxTime (if any) admits the script's --time."""
    if "Default=" in config:
        e.append("%s: %r makes it the default partition (the scripts name it)" % (where, config))
    m = re.search(r"MaxTime=(\S+)", config)
    if m and "time" in asks and slurm_seconds(asks["time"]) > slurm_seconds(m.group(1)):
        e.append("%s: MaxTime=%s refuses the script's --time=%s" % (where, m.group(1), asks["time"]))


def check_slinky_shm(slurmd, pod, where, e):
    """/dev/shm: a memory-backed emptyDir, no larger than the container's memory limit."""
    mounts = [v.get("name") for v in (slurmd.get("volumeMounts") or []) if isinstance(v, dict) and v.get("mountPath") == "/dev/shm"]
    vols = {v.get("name"): v for v in (pod.get("volumes") or []) if isinstance(v, dict)}
    if len(mounts) != 1 or mounts[0] not in vols:
        e.append("%s: no volume mounted at /dev/shm" % where)
        return
    ed = vols[mounts[0]].get("emptyDir") or {}
    limit = quantity_bytes((((slurmd.get("resources") or {}).get("limits")) or {}).get("memory", ""))
    size = quantity_bytes(ed.get("sizeLimit", ""))
    if ed.get("medium") != "Memory" or size is None:
        e.append("%s: /dev/shm is not an emptyDir of medium Memory with a sizeLimit" % where)
    elif limit is not None and size > limit:
        e.append("%s: /dev/shm sizeLimit %s is more than the memory limit" % (where, ed.get("sizeLimit")))


def check_dir(d, S, docs=None):
    """{file: [errors]} for every artifact of d (docs: parsed files to use instead)."""
    files = ["slinky-values.yaml", "slinky-nodeset.yaml", "soperator-nodeset.yaml", "soperator-partition.yaml"]
    if docs is None:
        docs = {}
        for f in files:
            p = os.path.join(d, f)
            if os.path.exists(p):
                docs[f] = yaml.safe_load(open(p))
    res = {f: [] for f in docs}
    asks = script_asks(d)
    gres = asks.get("gres", "")
    gres = "Gres=" + gres if gres else ""
    for f, doc in docs.items():
        e = res[f]
        if not isinstance(doc, dict):
            e.append("not a mapping")
            continue
        if f == "slinky-nodeset.yaml":
            check_slinky_nodeset(doc, S, e)
            spec = doc.get("spec") or {}
            check_slinky_shm(spec.get("slurmd") or {}, (spec.get("template") or {}).get("spec") or {}, "spec", e)
            if spec.get("extraConf", "") != gres:
                e.append("spec.extraConf %r, the script asks for %r" % (spec.get("extraConf"), gres))
            if isinstance(spec.get("replicas"), int) and "nodes" in asks and int(asks["nodes"]) > spec["replicas"]:
                e.append("the script asks for %s nodes, the node set has %d" % (asks["nodes"], spec["replicas"]))
        elif f == "slinky-values.yaml":
            check_slinky_values(doc, S, e)
            parts = {k: v for k, v in (doc.get("partitions") or {}).items() if isinstance(v, dict) and v.get("enabled")}
            if asks.get("partition") not in parts:
                e.append("the script's partition %r is not an enabled partition %s" % (asks.get("partition"), sorted(parts)))
            for pname, pv in parts.items():
                check_partition_line(str(pv.get("config", "")), asks, "partitions.%s.config" % pname, e)
            sets = doc.get("nodesets") or {}
            for name, ns in sets.items():
                if (ns or {}).get("extraConf", "") != gres:
                    e.append("nodesets.%s.extraConf %r, the script asks for %r" % (name, (ns or {}).get("extraConf"), gres))
            nsdoc = docs.get("slinky-nodeset.yaml")
            if isinstance(nsdoc, dict) and len(sets) == 1:
                name, ns = next(iter(sets.items()))
                spec = nsdoc.get("spec") or {}
                sd = dict(spec.get("slurmd") or {})
                sd.pop("name", None)
                pod = dict((spec.get("template") or {}).get("spec") or {})
                pod.pop("hostname", None)
                for what, a, b in (("replicas", ns.get("replicas"), spec.get("replicas")), ("slurmd", ns.get("slurmd"), sd),
                                   ("podSpec", ns.get("podSpec"), pod)):
                    if a != b:
                        e.append("nodesets.%s.%s differs from slinky-nodeset.yaml" % (name, what))
        elif f == "soperator-nodeset.yaml":
            check_crd(doc, S, "slurm.nebius.ai/v1alpha1/NodeSet", e)
            spec = doc.get("spec") or {}
            static = (spec.get("nodeConfig") or {}).get("static", "")
            if static != gres:
                e.append("spec.nodeConfig.static %r, the script asks for %r" % (static, gres))
            sd = spec.get("slurmd") or {}
            shm = quantity_bytes(((sd.get("volumes") or {}).get("sharedMemorySize", "")))
            mem = quantity_bytes((sd.get("resources") or {}).get("memory", ""))
            if shm is None or (mem is not None and shm > mem):
                e.append("spec.slurmd.volumes.sharedMemorySize %r: missing, or more than the memory"
                         % (sd.get("volumes") or {}).get("sharedMemorySize"))
            if isinstance(spec.get("replicas"), int) and "nodes" in asks and int(asks["nodes"]) > spec["replicas"]:
                e.append("the script asks for %s nodes, the node set has %d" % (asks["nodes"], spec["replicas"]))
        elif f == "soperator-partition.yaml":
            check_soperator_patch(doc, S, e)
            parts = ((doc.get("spec") or {}).get("partitionConfiguration") or {}).get("partitions") or []
            names = [p.get("name") for p in parts if isinstance(p, dict)]
            if asks.get("partition") not in names:
                e.append("the script's partition %r is not in %s" % (asks.get("partition"), names))
            for p in parts:
                if isinstance(p, dict):
                    check_partition_line(str(p.get("config", "")), asks, "partition %r" % p.get("name"), e)
            nsdoc = docs.get("soperator-nodeset.yaml")
            if isinstance(nsdoc, dict):
                want = (nsdoc.get("metadata") or {}).get("name")
                for p in parts:
                    if isinstance(p, dict) and p.get("name") == asks.get("partition") and want not in (p.get("nodeSetRefs") or []):
                        e.append("partition %r does not hold node set %r" % (p.get("name"), want))
    return res


# The violations --self-test introduces, one at a time: (file, description, mutation).
def _set(path, value):
    def f(doc):
        x = doc
        for k in path[:-1]:
            x = x[k]
        x[path[-1]] = value
    return f


def _del(path):
    def f(doc):
        x = doc
        for k in path[:-1]:
            x = x[k]
        del x[path[-1]]
    return f


MUTATIONS = [
    ("slinky-nodeset.yaml", "replicas as a string", _set(["spec", "replicas"], "32")),
    ("slinky-nodeset.yaml", "unknown spec field", _set(["spec", "replica"], 32)),
    ("slinky-nodeset.yaml", "scalingMode not in the enum", _set(["spec", "scalingMode"], "Deployment")),
    ("slinky-nodeset.yaml", "controllerRef missing", _del(["spec", "controllerRef"])),
    ("slinky-nodeset.yaml", "memory limit not a quantity", _set(["spec", "slurmd", "resources", "limits", "memory"], "2 TB")),
    ("slinky-nodeset.yaml", "unknown container field", _set(["spec", "slurmd", "resource"], {})),
    ("slinky-nodeset.yaml", "toleration with an unknown field", _set(["spec", "template", "spec", "tolerations"], [{"key": "a", "efect": "NoSchedule"}])),
    ("slinky-nodeset.yaml", "namespace not a DNS label", _set(["metadata", "namespace"], "Slurm_NS")),
    ("slinky-nodeset.yaml", "GRES other than the script's", _set(["spec", "extraConf"], "Gres=gpu:h100:4")),
    ("slinky-nodeset.yaml", "no /dev/shm", _set(["spec", "slurmd", "volumeMounts"], [])),
    ("slinky-nodeset.yaml", "/dev/shm on disk", _set(["spec", "template", "spec", "volumes", 0, "emptyDir"], {"sizeLimit": "1Gi"})),
    ("slinky-nodeset.yaml", "/dev/shm above the memory limit", _set(["spec", "template", "spec", "volumes", 0, "emptyDir", "sizeLimit"], "99Pi")),
    ("slinky-nodeset.yaml", "hostNetwork as a string", _set(["spec", "template", "spec", "hostNetwork"], "true")),
    ("slinky-values.yaml", "a value the chart does not have", _set(["nodesets", "@", "replica"], 1)),
    ("slinky-values.yaml", "the partition made the default", _set(["partitions", "gpu", "config"], "Default=YES State=UP")),
    ("slinky-values.yaml", "a MaxTime below the script's --time", _set(["partitions", "gpu", "config"], "MaxTime=00:01:00 State=UP")),
    ("slinky-values.yaml", "podSpec volume without a name", _set(["nodesets", "@", "podSpec", "volumes"], [{"hostPath": {"path": "/x"}}])),
    ("slinky-values.yaml", "partition other than the script's", _set(["partitions"], {"cpu": {"enabled": True, "nodesets": ["x"]}})),
    ("slinky-values.yaml", "node set differs from the NodeSet file", _set(["nodesets", "@", "replicas"], 3)),
    ("soperator-nodeset.yaml", "replicas as a string", _set(["spec", "replicas"], "32")),
    ("soperator-nodeset.yaml", "updateStrategy not in the enum", _set(["spec", "updateStrategy"], "RollingUpdate")),
    ("soperator-nodeset.yaml", "munge missing", _del(["spec", "munge"])),
    ("soperator-nodeset.yaml", "no sharedMemorySize", _del(["spec", "slurmd", "volumes", "sharedMemorySize"])),
    ("soperator-nodeset.yaml", "jail missing", _del(["spec", "slurmd", "volumes", "jail"])),
    ("soperator-nodeset.yaml", "cpu not a quantity", _set(["spec", "slurmd", "resources", "cpu"], "120.5 cores")),
    ("soperator-nodeset.yaml", "name not a DNS subdomain", _set(["metadata", "name"], "Worker_GPU")),
    ("soperator-nodeset.yaml", "GRES other than the script's", _set(["spec", "nodeConfig", "static"], "Gres=gpu:8")),
    ("soperator-partition.yaml", "configType not in the enum", _set(["spec", "partitionConfiguration", "configType"], "yaml")),
    ("soperator-partition.yaml", "a field SlurmCluster lacks", _set(["spec", "partitions"], [])),
    ("soperator-partition.yaml", "partition without a name", _set(["spec", "partitionConfiguration", "partitions"], [{"nodeSetRefs": ["worker"]}])),
    ("soperator-partition.yaml", "the partition made the default", _set(["spec", "partitionConfiguration", "partitions", 0, "config"], "Default=YES State=UP")),
]


def self_test(d, S, out):
    docs = {}
    for f in ("slinky-values.yaml", "slinky-nodeset.yaml", "soperator-nodeset.yaml", "soperator-partition.yaml"):
        p = os.path.join(d, f)
        if os.path.exists(p):
            docs[f] = yaml.safe_load(open(p))
    passed = failed = 0
    clean = check_dir(d, S, docs)
    for f, e in clean.items():
        if e:
            out.append("FAIL self-test %s: the unmodified file fails: %s" % (f, "; ".join(e)))
            failed += 1
    for f, what, mut in MUTATIONS:
        if f not in docs:
            continue
        bad = copy.deepcopy(docs)
        doc = bad[f]
        if f == "slinky-values.yaml":
            name = next(iter(doc["nodesets"]))
            doc["nodesets"]["@"] = doc["nodesets"].pop(name)
        try:
            mut(doc)
        except (KeyError, IndexError, TypeError) as ex:
            out.append("FAIL self-test %s: cannot apply '%s' (%r)" % (f, what, ex))
            failed += 1
            continue
        if f == "slinky-values.yaml":
            doc["nodesets"][name] = doc["nodesets"].pop("@")
        errs = check_dir(d, S, bad)[f]
        if errs:
            out.append("ok   self-test %s: %s is refused (%s)" % (f, what, errs[0]))
            passed += 1
        else:
            out.append("FAIL self-test %s: %s passes the checker" % (f, what))
            failed += 1
    return passed, failed


def main():
    args = sys.argv[1:]
    test = args and args[0] == "--self-test"
    if test:
        args = args[1:]
    S = Schemas(args[0])
    passed = failed = 0
    out = []
    for d in args[1:]:
        if test:
            p, f = self_test(d, S, out)
            passed += p
            failed += f
            continue
        for f, e in sorted(check_dir(d, S).items()):
            if e:
                out.append("FAIL %s/%s: %s" % (d.rstrip("/"), f, "; ".join(e)))
                failed += 1
            else:
                out.append("ok   %s/%s matches the recorded schema" % (d.rstrip("/"), f))
                passed += 1
    print("\n".join(out))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
