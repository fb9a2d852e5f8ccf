#!/usr/bin/python3
"""k8s_schema_gen.py SLINKY_GIT SOPERATOR_GIT > tests/emitters/k8s_schema.json

Derives the schemas tests/emitters/k8s_check.py validates llmc's Kubernetes
artifacts against, from the operators' own sources (a git directory each, bare
or not; HEAD is read, its commit recorded):

  SchedMD slurm-operator (github.com/SlinkyProject/slurm-operator)
    config/crd/bases/slinky.slurm.net_nodesets.yaml   NodeSet openAPIV3Schema
    helm/slurm/values.yaml                            the chart's value keys
      (the chart has no values.schema.json: its own values.yaml is the schema
      of names; a key llmc writes must be one the chart reads)
  Nebius Soperator (github.com/nebius/soperator)
    config/crd/bases/slurm.nebius.ai_nodesets.yaml     NodeSet openAPIV3Schema
    config/crd/bases/slurm.nebius.ai_slurmclusters.yaml  SlurmCluster: its
      spec's key names and the partitionConfiguration subtree
    and, from the same NodeSet CRD, the core/v1 types that Slinky's CRD leaves
    open (x-kubernetes-preserve-unknown-fields: the slurmd Container and the
    pod template's spec): Container, Toleration, VolumeSource.

Descriptions are dropped; everything a validator needs (type, properties,
required, enum, pattern, items, additionalProperties, anyOf, int-or-string,
preserve-unknown, minimum/maximum, format) is kept. Deterministic output.
"""
import json
import subprocess
import sys

import yaml

KEEP = {"type", "properties", "required", "enum", "pattern", "items", "additionalProperties", "anyOf",
        "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "minimum", "maximum",
        "format", "maxLength", "minLength", "nullable"}


def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), check=True, capture_output=True, text=True).stdout


def show(repo, path):
    return git(repo, "show", "HEAD:" + path)


def prune(s):
    if isinstance(s, dict):
        out = {}
        for k, v in s.items():
            if k not in KEEP:
                continue
            if k == "properties":
                out[k] = {pk: prune(pv) for pk, pv in sorted(v.items())}
            elif k in ("items", "additionalProperties") and isinstance(v, dict):
                out[k] = prune(v)
            elif k == "anyOf":
                out[k] = [prune(x) for x in v]
            else:
                out[k] = v
        return out
    return s


def crd_schema(text, version):
    d = yaml.safe_load(text)
    for v in d["spec"]["versions"]:
        if v["name"] == version:
            return d["spec"]["group"], d["spec"]["names"]["kind"], prune(v["schema"]["openAPIV3Schema"])
    raise SystemExit("version %s not in CRD %s" % (version, d["metadata"]["name"]))


def value_keys(v):
    """The chart's value tree: a mapping's keys, recursively; {} or a list is open."""
    if isinstance(v, dict) and v:
        return {k: value_keys(x) for k, x in sorted(v.items())}
    return None


def main():
    slinky, soperator = sys.argv[1], sys.argv[2]
    out = {"generated_by": "tests/emitters/k8s_schema_gen.py", "sources": [], "crds": {}, "core": {}, "helm": {}}
    for repo, name, paths in (
        (slinky, "SlinkyProject/slurm-operator",
         ["config/crd/bases/slinky.slurm.net_nodesets.yaml", "helm/slurm/values.yaml", "helm/slurm/Chart.yaml"]),
        (soperator, "nebius/soperator",
         ["config/crd/bases/slurm.nebius.ai_nodesets.yaml", "config/crd/bases/slurm.nebius.ai_slurmclusters.yaml",
          "helm/soperator/Chart.yaml"]),
    ):
        commit = git(repo, "rev-parse", "HEAD").strip()
        chart = yaml.safe_load(show(repo, paths[-1]))
        out["sources"].append({"repo": name, "commit": commit, "chart_version": chart.get("version"),
                               "app_version": str(chart.get("appVersion")), "paths": paths[:-1]})

    g, k, s = crd_schema(show(slinky, "config/crd/bases/slinky.slurm.net_nodesets.yaml"), "v1beta1")
    out["crds"]["%s/v1beta1/%s" % (g, k)] = s
    g, k, s = crd_schema(show(soperator, "config/crd/bases/slurm.nebius.ai_nodesets.yaml"), "v1alpha1")
    out["crds"]["%s/v1alpha1/%s" % (g, k)] = s
    sp = s["properties"]["spec"]["properties"]
    out["core"]["Container"] = sp["customInitContainers"]["items"]
    out["core"]["Toleration"] = sp["tolerations"]["items"]
    out["core"]["VolumeSource"] = sp["slurmd"]["properties"]["volumes"]["properties"]["jail"]
    g, k, s = crd_schema(show(soperator, "config/crd/bases/slurm.nebius.ai_slurmclusters.yaml"), "v1")
    spec = s["properties"]["spec"]
    out["crds"]["%s/v1/%s#spec-keys" % (g, k)] = sorted(spec["properties"])
    out["crds"]["%s/v1/%s#partitionConfiguration" % (g, k)] = spec["properties"]["partitionConfiguration"]

    vals = yaml.safe_load(show(slinky, "helm/slurm/values.yaml"))
    out["helm"]["slurm"] = {"top": sorted(vals), "controller": value_keys(vals["controller"]),
                            "nodeset": value_keys(vals["nodesetDefaults"]),
                            "partition": value_keys(vals["partitions"]["all"])}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
