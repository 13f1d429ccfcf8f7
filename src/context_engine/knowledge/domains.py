"""Built-in domain vocabularies of the hint layer (DESIGN.md §7.1).

A *domain* is the knowledge area of a document (kubernetes, etcd, node, ...). Resource categories are the first
path segment below ``ctx://resources/`` (DESIGN §1), which for a corpus ingested at ``ctx://resources/runbooks/...``
is ``runbooks`` for every document, so the domain is derived as follows (first rule that applies):

1. the document's own directory name is a ``path_aliases`` entry of a domain that is not cross-cutting
   (``.../kubernetes/X.md``, ``.../cluster-etcd-operator/X.md``);
2. its title (the alert name) starts with a ``title_prefixes`` entry at a CamelCase boundary (``KubePodNotReady`` ->
   kubernetes; ``etcdNoLeader`` -> etcd), the longest prefix winning (``KubeVirt...`` -> virtualization);
3. a directory name on its path, nearest first, is a ``path_aliases`` entry (``general/Watchdog.md`` -> general);
4. the node's category (the first path segment), when it has one.

Rule 1 beats rule 2 so that a product directory keeps its alerts (``openshift-virtualization-operator/KubeMacPoolDown``
is virtualization); rule 2 beats rule 3 so that a catch-all directory (``general/``,
``cluster-monitoring-operator/``) does not hide the alert's own area (``general/NodeNetworkInterfaceFlapping`` is
node).

A *cross-cutting* domain (``general``: Watchdog, TargetDown, InfoInhibitor) holds runbooks that concern every area;
its documents pass every other domain's filter, and no query term names it.

On the query side a domain is named by its ``terms`` (English words or phrases, Chinese words) and by alert-like
tokens with a title prefix. The vocabularies below were written for the runbook corpora in ``../shared/data``
(prometheus-operator, OpenShift, KubeSphere) and the sample corpus; ``Settings.knowledge.domains`` adds or replaces
domains, ``builtin_domains = false`` drops these.

Terms are deliberately specific: words every alert text contains (``node``, ``cluster``, ``alert``, ``error``) are
not domain terms, because a single wrong domain filters the semantic search to the wrong documents.
"""

from __future__ import annotations

from context_engine.settings import DomainVocabulary, KnowledgeSettings

BUILTIN_DOMAINS: dict[str, DomainVocabulary] = {
    "kubernetes": DomainVocabulary(
        path_aliases=(
            "kubernetes",
            "k8s",
            "kube-state-metrics",
            "cluster-kube-apiserver-operator",
            "cluster-kube-controller-manager-operator",
            "cluster-kube-scheduler-operator",
            "cluster-kube-descheduler-operator",
            "cluster-openshift-apiserver-operator",
        ),
        title_prefixes=("Kube", "Kubelet", "KubeStateMetrics", "CPUThrottling", "PodDisruptionBudget"),
        terms=(
            "kubernetes",
            "k8s",
            "pod",
            "pods",
            "deployment",
            "deployments",
            "statefulset",
            "statefulsets",
            "daemonset",
            "daemonsets",
            "replicaset",
            "replicasets",
            "kubelet",
            "kubelets",
            "kube-apiserver",
            "apiserver",
            "api server",
            "kube-scheduler",
            "kube-controller-manager",
            "controller manager",
            "hpa",
            "horizontalpodautoscaler",
            "persistentvolume",
            "persistentvolumes",
            "persistent volume",
            "persistentvolumeclaim",
            "pvc",
            "cronjob",
            "kube-proxy",
            "kube-state-metrics",
            "crashloopbackoff",
            "crash looping",
            "crashlooping",
            "imagepullbackoff",
            "oomkilled",
            "namespace quota",
            "resource quota",
            "容器",
            "容器组",
            "副本",
            "副本集",
            "命名空间",
            "探针",
            "存活探针",
            "就绪探针",
            "滚动升级",
            "镜像拉取",
        ),
    ),
    "general": DomainVocabulary(
        path_aliases=("general", "common", "misc", "shared"),
        cross_cutting=True,
    ),
    "etcd": DomainVocabulary(
        path_aliases=("etcd", "cluster-etcd-operator"),
        title_prefixes=("etcd",),
        terms=("etcd", "etcdctl", "etcd leader", "etcd member", "etcd members"),
    ),
    "node": DomainVocabulary(
        path_aliases=("node", "node-exporter", "host"),
        title_prefixes=("Node",),
        terms=(
            "node-exporter",
            "node exporter",
            "filesystem",
            "filesystems",
            "file system",
            "inode",
            "inodes",
            "conntrack",
            "raid",
            "ntp",
            "chrony",
            "clock skew",
            "file descriptor",
            "file descriptors",
            "network interface",
            "textfile collector",
            "text file collector",
            "文件系统",
            "磁盘",
            "磁盘空间",
            "文件描述符",
            "时钟",
            "网卡",
        ),
    ),
    "prometheus": DomainVocabulary(
        path_aliases=("prometheus", "prometheus-operator"),
        title_prefixes=("Prometheus", "PrometheusOperator", "ConfigReloader", "ClusterMonitoringOperator", "Thanos"),
        terms=(
            "prometheus",
            "prometheus-operator",
            "prometheus operator",
            "tsdb",
            "remote write",
            "remote storage",
            "scrape",
            "scrape config",
            "promql",
            "config-reloader",
            "rule evaluation",
            "rule evaluations",
            "rule group",
            "thanos",
            "recording rule",
            "普罗米修斯",
        ),
    ),
    "alertmanager": DomainVocabulary(
        path_aliases=("alertmanager",),
        title_prefixes=("Alertmanager",),
        terms=("alertmanager", "alertmanagers", "receiver", "receivers", "silence", "silences", "告警通知"),
    ),
    "storage": DomainVocabulary(
        path_aliases=("storage", "openshift-container-storage-operator", "cluster-image-registry-operator"),
        title_prefixes=("Ceph", "ODF", "Odf", "NooBaa", "Obc", "OSD", "Storage", "ImageRegistryStorage", "KMS"),
        terms=("ceph", "osd", "osds", "noobaa", "odf", "rbd", "cephfs", "object store", "mds", "存储", "存储卷"),
    ),
    "networking": DomainVocabulary(
        path_aliases=(
            "networking",
            "network",
            "cluster-network-operator",
            "cluster-dns-operator",
            "network-observability-operator",
        ),
        title_prefixes=("OVN", "Ovn", "OVNKubernetes", "CoreDNS", "DNS", "NetObserv", "Netpol", "NoOvn"),
        terms=("ovn", "ovs", "sdn", "dns", "coredns", "network policy", "netobserv", "ingress", "egress", "网络"),
    ),
    "virtualization": DomainVocabulary(
        path_aliases=("openshift-virtualization-operator", "virtualization", "kubevirt"),
        title_prefixes=(
            "KubeVirt",
            "Kubevirt",
            "KubeMacPool",
            "Kubemacpool",
            "Virt",
            "VM",
            "VMI",
            "CDI",
            "HCO",
            "HPP",
            "SSP",
            "Cnao",
            "VirtualMachine",
        ),
        terms=(
            "kubevirt",
            "virtual machine",
            "virtual machines",
            "vm",
            "vms",
            "vmi",
            "virt-launcher",
            "virt-handler",
            "虚拟机",
        ),
    ),
    "logging": DomainVocabulary(
        path_aliases=("cluster-logging-operator", "logging"),
        title_prefixes=("ClusterLogForwarder", "Collector"),
        terms=("fluentd", "log forwarder", "clusterlogforwarder", "loki", "elasticsearch", "日志"),
    ),
    "platform": DomainVocabulary(
        path_aliases=("machine-config-operator", "cluster-version-operator"),
        title_prefixes=("MachineConfig", "ClusterVersion", "ClusterOperator"),
        terms=("machine config", "machineconfig", "mco", "cluster version", "cluster upgrade", "cluster operator"),
    ),
    "database": DomainVocabulary(
        path_aliases=("database", "databases", "db"),
        title_prefixes=("ConnectionPool", "Postgres", "MySQL"),
        terms=("database", "postgres", "postgresql", "mysql", "connection pool", "数据库", "连接池"),
    ),
}


def domain_vocabularies(settings: KnowledgeSettings) -> dict[str, DomainVocabulary]:
    """The effective vocabularies: the built-in ones (unless ``builtin_domains`` is false) updated by
    ``settings.domains`` (a configured domain replaces a built-in one of the same name)."""
    out = dict(BUILTIN_DOMAINS) if settings.builtin_domains else {}
    out.update(settings.domains)
    return out
