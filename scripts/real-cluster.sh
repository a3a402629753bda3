#!/usr/bin/env bash
# Kubernetes' own control plane on loopback, for the tests and for trying the operator on a real
# API server (DESIGN section 17):
#
#   scripts/real-cluster.sh up DIR [--nodes N] [--etcd-compaction-interval DURATION] [--apiservers N]
#                                                build what is missing, start it, write DIR/kubeconfig
#   scripts/real-cluster.sh restart DIR COMPONENT
#                                                a fault: SIGKILL one component (etcd, kube-apiserver,
#                                                kube-apiserver-2, kube-controller-manager,
#                                                kube-scheduler, kwok) and start it again on its data
#                                                and ports; returns once it answers
#   scripts/real-cluster.sh kill DIR COMPONENT   a fault that lasts: SIGKILL one component; it stays down
#   scripts/real-cluster.sh start DIR COMPONENT  start a killed component again (same data and ports);
#                                                returns once it answers
#   scripts/real-cluster.sh cut DIR              a fault (with --apiservers 2): every connection to
#                                                every API server closed at once; new ones are taken
#   scripts/real-cluster.sh lag DIR APISERVER MILLISECONDS
#                                                a fault (with --apiservers 2): every answer of one API
#                                                server (kube-apiserver or kube-apiserver-2) and every
#                                                event of its watches late by MILLISECONDS; 0 undoes it
#   scripts/real-cluster.sh squeeze DIR NAMESPACE SERVICEACCOUNT
#                                                a fault: API Priority and Fairness gives the account's
#                                                requests a priority level of no seats that rejects what
#                                                it cannot run (429 and Retry-After); only one of its
#                                                requests runs at a time (the API server always lets one
#                                                through a level with nothing running)
#   scripts/real-cluster.sh unsqueeze DIR        undoes `squeeze`
#   scripts/real-cluster.sh down DIR             stop every process `up` started in DIR
#   scripts/real-cluster.sh build                only build (the test command starts it in the background)
#
# `up` builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler (Kubernetes 1.37,
# pinned in tests/real-cluster/go.mod) and kwok (the same module, so that it compiles against the
# same Kubernetes libraries and shares their compiled packages) with `go build`
# the first time (Go's caches make the next builds quick; the binaries are kept under
# target/real-cluster/ with a stamp of the modules they came from). It then starts on free
# loopback ports: etcd; kube-apiserver with its own CA, serving certificate and service-account
# keys (`--authorization-mode=Node,RBAC`, the default admission plugins); kube-controller-manager
# (garbage collection, namespaces, service accounts and their tokens); kube-scheduler; kwok, which
# runs the scheduled pods by the Stages of tests/real-cluster/stages (kubesim's pod behaviours);
# and N nodes (default 3). It exits 0 once /readyz answers, every node is Ready and the default
# namespace has its service account.
#
# With `--apiservers 2`, as in a highly available control plane, two kube-apiservers share etcd,
# each with a watch cache of its own, and every client reaches them through a front on one
# loopback port (the kubeconfigs' server): HAProxy (Debian's, installed when missing) spreads the
# connections over both, round robin, and stops sending new ones to an API server that does not
# answer on its own port (checked twice a second); between the front and each API server is
# toxiproxy (tests/real-cluster/front), through which `cut` and `lag` act. A client thus lands on
# either API server and, after a cut or a restart, may land on the other one, whose cache can be
# behind what it already saw: the stale reads DESIGN section 19 asks the operator to survive.
#
# DIR/kubeconfig is cluster-admin (client certificate in
# group system:masters); DIR/logs holds each component's output; DIR/pids what `down` stops.
#
# Tuned as the operator of a large cluster tunes it, nothing more (the fleet benchmark runs the
# operator here at its chart's defaults, docs/benchmarks.md): kube-scheduler and
# kube-controller-manager send up to 500 requests a second (bursts of 1,000) instead of their
# defaults, 50 and 20. The scheduler binds every pod and records an event for it, two requests a
# pod, so at 50 a second it starts at most 25 pods a second in the whole cluster, whoever created
# them; the controller manager gives each new namespace its ServiceAccount, without which no pod
# is admitted there, at 20 a second. Both are the cluster's ceilings, not the operator's, and
# large clusters raise them. kwok, the kubelets' stand-in, plays 16 pods' stages at a time
# instead of 4 (tests/real-cluster/kwok.yaml says why). etcd may hold 8 GiB (its
# documented largest quota) instead of 2: the fleet benchmark's 1,000 tenants left a 375 MiB
# database, growing with the tenants, and at its quota etcd refuses every write until
# defragmented, so a large cluster's operator raises it before it is near. The API server keeps
# its defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
modules="$root/tests/real-cluster"
bin_dir="${CARGO_TARGET_DIR:-$root/target}/real-cluster/bin"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Pinned: the modules are built as go.mod and go.sum say, never updated by a build.
export GOFLAGS="-mod=readonly -buildvcs=false"

usage() {
    echo "usage: $0 up DIR [--nodes N] [--etcd-compaction-interval DURATION] [--apiservers N]" \
        "| restart|kill|start DIR COMPONENT | cut DIR | lag DIR APISERVER MILLISECONDS" \
        "| squeeze DIR NAMESPACE SERVICEACCOUNT | unsqueeze DIR | down DIR" >&2
    exit 2
}

log() { echo "real-cluster: $*" >&2; }

die() {
    echo "real-cluster: $*" >&2
    exit 1
}

# The binaries are built again only when a module file changed. One build at a time: the test
# command starts one in the background, and a test's `up` waits for it under the same lock.
build() {
    mkdir -p "$bin_dir"
    (
        flock 9
        build_locked
    ) 9>"$bin_dir/../build.lock"
}

# Without symbol tables and DWARF (-s -w): the linker's share of a cold build and a third of the
# binaries' size; stack traces keep their function names and lines.
go_build_flags=(-trimpath -ldflags=-s\ -w)

build_locked() {
    local stamp
    stamp=$({ cat "$modules/go.mod" "$modules/go.sum" "$modules/front/go.mod" "$modules/front/go.sum" \
        "$modules/kwok-patched.py"
        echo "${go_build_flags[*]}"; } | sha256sum | cut -d' ' -f1)
    if [ -f "$bin_dir/stamp" ] && [ "$(cat "$bin_dir/stamp")" = "$stamp" ]; then
        log "built already (the modules and flags of $bin_dir/stamp)"
        return
    fi
    command -v go >/dev/null || die "go is needed to build the control plane (Go 1.26 or newer)"
    rm -f "$bin_dir/stamp"
    local started=$SECONDS
    log "building etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and toxiproxy (first time: minutes)"
    (cd "$modules" && go build "${go_build_flags[@]}" -o "$bin_dir/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler \
        go.etcd.io/etcd/server/v3)
    # kwok with its pod deletions made by UID, as a kubelet's are (tests/real-cluster/kwok-patched.py):
    # the same module's pins, kwok replaced by a patched copy through a module file of the build's own.
    local patched="$bin_dir/../kwok-patched"
    (cd "$modules" && go mod download sigs.k8s.io/kwok &&
        python3 kwok-patched.py "$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)" "$patched" &&
        go build "${go_build_flags[@]}" -modfile "$patched/build/go.mod" -o "$bin_dir/" sigs.k8s.io/kwok/cmd/kwok)
    mv "$bin_dir/server" "$bin_dir/etcd"
    (cd "$modules/front" && go build "${go_build_flags[@]}" -o "$bin_dir/toxiproxy-server" \
        github.com/Shopify/toxiproxy/v2/cmd/server &&
        go build "${go_build_flags[@]}" -o "$bin_dir/toxiproxy-cli" github.com/Shopify/toxiproxy/v2/cmd/cli)
    echo "$stamp" >"$bin_dir/stamp"
    log "built in $((SECONDS - started))s"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A CA, the API server's serving certificate, client certificates for cluster-admin, the
# controller manager and the scheduler, and the service-account signing key pair.
certificates() {
    local pki="$1"
    mkdir -p "$pki"
    command -v openssl >/dev/null || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
    }
    (
        cd "$pki"
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=express-test-ca" \
            -keyout ca.key -out ca.crt 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >apiserver.ext
        openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
            -extfile apiserver.ext -out apiserver.crt 2>/dev/null
        client() {
            local name="$1" subject="$2"
            openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr" 2>/dev/null
            printf 'extendedKeyUsage=clientAuth\n' >client.ext
            openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
                -extfile client.ext -out "$name.crt" 2>/dev/null
        }
        client admin "/O=system:masters/CN=express-test-admin"
        client controller-manager "/CN=system:kube-controller-manager"
        client scheduler "/CN=system:kube-scheduler"
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
        rm -f ./*.csr ./*.ext
    )
}

kubeconfig() {
    local path="$1" server="$2" pki="$3" user="$4"
    cat >"$path" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$user.crt
    client-key: $pki/$user.key
contexts:
- name: real
  context:
    cluster: real
    user: $user
current-context: real
EOF
}

start() {
    local dir="$1" name="$2"
    shift 2
    # Its command line, kept so that `restart` starts it again as it was (same data, same ports).
    mkdir -p "$dir/commands"
    printf '%q ' "$@" >"$dir/commands/$name"
    "$@" >>"$dir/logs/$name.log" 2>&1 &
    echo "$! $name" >>"$dir/pids"
}

# Kills one component without a word (SIGKILL, as a crash or an OOM kill would); it stays down
# until `start_component`.
kill_component() {
    local dir="$1" name="$2"
    [ -f "$dir/commands/$name" ] || die "no component $name in $dir"
    local pid others
    pid=$(awk -v n="$name" '$2 == n {print $1}' "$dir/pids")
    if [ -n "$pid" ]; then
        kill -9 "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
    others=$(awk -v n="$name" '$2 != n' "$dir/pids")
    printf '%s\n' "$others" | sed '/^$/d' >"$dir/pids"
    log "killed $name"
}

# Starts a killed component again from its recorded command line: the same data directory and
# ports, so clients reconnect to the same address. Returns once it answers again.
start_component() {
    local dir="$1" name="$2"
    [ -f "$dir/commands/$name" ] || die "no component $name in $dir"
    awk -v n="$name" '$2 == n {found = 1} END {exit !found}' "$dir/pids" && die "$name is running"
    local command
    command=$(cat "$dir/commands/$name")
    eval "set -- $command"
    start "$dir" "$name" "$@"
    case "$name" in
    etcd) wait_for "etcd" 60 "$dir" curl -fsS "$(cat "$dir/etcd")/health" ;;
    kube-apiserver*) wait_for "$name /readyz" 120 "$dir" api_at "$dir" "$(cat "$dir/url-$name")" /readyz ;;
    esac
    log "started $name"
}

wait_for() {
    local what="$1" seconds="$2" dir="$3"
    shift 3
    local deadline=$((SECONDS + seconds)) pid name
    until "$@" >/dev/null 2>&1; do
        while read -r pid name; do
            if ! kill -0 "$pid" 2>/dev/null; then
                log "$name exited while waiting for $what; its last lines:"
                tail -n 20 "$dir/logs/$name.log" >&2 || true
                down "$dir"
                exit 1
            fi
        done <"$dir/pids"
        if [ $SECONDS -ge $deadline ]; then
            log "timed out after ${seconds}s waiting for $what; the components' last lines:"
            tail -n 5 "$dir"/logs/*.log >&2 || true
            down "$dir"
            exit 1
        fi
        sleep 0.2
    done
}

api() {
    local dir="$1" path="$2"
    api_at "$dir" "$(cat "$dir/server")" "$path"
}

# One API server's own address, not the front's.
api_at() {
    local dir="$1" url="$2" path="$3"
    curl -fsS --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "$url$path"
}

nodes_ready() {
    local dir="$1" count="$2"
    local ready
    ready=$(api "$dir" /api/v1/nodes | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["items"]
print(sum(1 for n in nodes for c in n.get("status", {}).get("conditions", [])
          if c["type"] == "Ready" and c["status"] == "True"))')
    [ "$ready" -ge "$count" ]
}

# One kube-apiserver, named NAME, on PORT; returns once it is ready.
start_apiserver() {
    local dir="$1" name="$2" port="$3" compaction="$4"
    local pki="$dir/pki"
    echo "https://127.0.0.1:$port" >"$dir/url-$name"
    start "$dir" "$name" "$bin_dir/kube-apiserver" \
        --etcd-servers "$(cat "$dir/etcd")" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
        --cert-dir "$pki" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 \
        --authorization-mode Node,RBAC \
        --endpoint-reconciler-type none \
        --etcd-compaction-interval "$compaction" \
        --allow-privileged=false
    wait_for "$name /readyz" 120 "$dir" api_at "$dir" "https://127.0.0.1:$port" /readyz
}

# The front of two or more API servers (see the top of this file): toxiproxy with one proxy per
# API server, named after it, and HAProxy spreading connections over the proxies.
start_front() {
    local dir="$1"
    shift
    command -v haproxy >/dev/null || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
    }
    local toxiproxy_port front_port name port listen proxies="" servers=""
    toxiproxy_port=$(free_port)
    front_port=$(free_port)
    for name in "$@"; do
        port=$(cat "$dir/url-$name")
        port=${port##*:}
        listen=$(free_port)
        proxies+="${proxies:+,}{\"name\": \"$name\", \"listen\": \"127.0.0.1:$listen\", \"upstream\": \"127.0.0.1:$port\", \"enabled\": true}"
        servers+="    server $name 127.0.0.1:$listen check port $port inter 500ms fall 2 rise 1"$'\n'
    done
    echo "[$proxies]" >"$dir/toxiproxy.json"
    echo "127.0.0.1:$toxiproxy_port" >"$dir/toxiproxy"
    start "$dir" toxiproxy "$bin_dir/toxiproxy-server" -host 127.0.0.1 -port "$toxiproxy_port" \
        -config "$dir/toxiproxy.json"
    wait_for "toxiproxy" 30 "$dir" toxiproxy "$dir" list
    # Watches last minutes: no idle timeout of the front's own ends them.
    cat >"$dir/haproxy.cfg" <<CONFIG
defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
frontend kube-apiservers
    bind 127.0.0.1:$front_port
    default_backend kube-apiservers
backend kube-apiservers
    balance roundrobin
$servers
CONFIG
    start "$dir" haproxy haproxy -db -f "$dir/haproxy.cfg"
    echo "https://127.0.0.1:$front_port" >"$dir/server"
    wait_for "the front /readyz" 60 "$dir" api "$dir" /readyz
}

toxiproxy() {
    local dir="$1"
    shift
    "$bin_dir/toxiproxy-cli" --host "http://$(cat "$dir/toxiproxy")" "$@"
}

# Every connection through the front closed: each proxy disabled (which closes its connections)
# and enabled again.
cut_connections() {
    local dir="$1" name
    [ -f "$dir/toxiproxy" ] || die "$dir has no front to cut (up it with --apiservers 2)"
    for name in $(python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))))' \
        "$dir/toxiproxy.json"); do
        toxiproxy "$dir" toggle "$name" >/dev/null
        toxiproxy "$dir" toggle "$name" >/dev/null
    done
    log "cut every connection to the API servers"
}

lag() {
    local dir="$1" name="$2" milliseconds="$3"
    [ -f "$dir/toxiproxy" ] || die "$dir has no front (up it with --apiservers 2)"
    toxiproxy "$dir" toxic remove --toxicName lag "$name" >/dev/null 2>&1 || true
    if [ "$milliseconds" -gt 0 ]; then
        toxiproxy "$dir" toxic add --type latency --toxicName lag --downstream \
            --attribute "latency=$milliseconds" "$name" >/dev/null
        log "$name answers ${milliseconds} ms late"
    else
        log "$name answers on time"
    fi
}

# A FlowSchema ahead of every other but the exempt one (precedence 2; 1 is exempt's, the chart's 1000) sends
# the account's requests to a level of zero nominal shares that neither lends nor borrows and
# rejects instead of queueing: what an API server under load or a mistaken APF rule does to one
# client.
squeeze() {
    local dir="$1" namespace="$2" account="$3" kind
    for kind in prioritylevelconfigurations flowschemas; do
        python3 - "$kind" "$namespace" "$account" <<'PY' | admin_request "$dir" PATCH \
            "/apis/flowcontrol.apiserver.k8s.io/v1/$kind/real-cluster-squeeze?fieldManager=real-cluster&force=true" \
            "application/apply-patch+yaml"
import json, sys
kind, namespace, account = sys.argv[1:]
group = "flowcontrol.apiserver.k8s.io/v1"
if kind == "prioritylevelconfigurations":
    spec = {"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 0,
                                           "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}
    document = {"kind": "PriorityLevelConfiguration", "spec": spec}
else:
    every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": True}
    rule = {"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": account}}],
            "resourceRules": [every], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
    spec = {"priorityLevelConfiguration": {"name": "real-cluster-squeeze"}, "matchingPrecedence": 2,
            "distinguisherMethod": {"type": "ByUser"}, "rules": [rule]}
    document = {"kind": "FlowSchema", "spec": spec}
print(json.dumps({"apiVersion": group, "metadata": {"name": "real-cluster-squeeze"}, **document}))
PY
    done
    log "the requests of $namespace/$account go to a level of no seats that rejects"
}

unsqueeze() {
    local dir="$1" kind
    for kind in flowschemas prioritylevelconfigurations; do
        admin_request "$dir" DELETE "/apis/flowcontrol.apiserver.k8s.io/v1/$kind/real-cluster-squeeze" </dev/null ||
            true
    done
    log "the squeeze is undone"
}

# A request as cluster-admin through the front, its body from standard input; the API server's
# answer is shown when it refuses.
admin_request() {
    local dir="$1" method="$2" path="$3" type="${4:-application/json}" answer
    answer=$(curl -s --fail-with-body --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" \
        --key "$dir/pki/admin.key" -X "$method" -H "Content-Type: $type" --data-binary @- \
        "$(cat "$dir/server")$path") || die "$method $path: $answer"
}

up() {
    local dir="$1" nodes="$2" compaction="$3" apiservers="$4"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ -s "$dir/pids" ] && die "$dir already has a running control plane (down it first)"
    build
    rm -rf "$dir/logs" "$dir/etcd-data" "$dir/pki"
    mkdir -p "$dir/logs"
    : >"$dir/pids"
    local started=$SECONDS
    certificates "$dir/pki"
    local pki="$dir/pki"
    local etcd_port etcd_peer
    etcd_port=$(free_port)
    etcd_peer=$(free_port)
    echo "http://127.0.0.1:$etcd_port" >"$dir/etcd"

    start "$dir" etcd "$bin_dir/etcd" --data-dir "$dir/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "default=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync \
        --quota-backend-bytes $((8 * 1024 * 1024 * 1024))
    wait_for "etcd" 60 "$dir" curl -fsS "http://127.0.0.1:$etcd_port/health"

    local names=(kube-apiserver) i server
    for i in $(seq 2 "$apiservers"); do names+=("kube-apiserver-$i"); done
    for i in "${names[@]}"; do
        start_apiserver "$dir" "$i" "$(free_port)" "$compaction"
    done
    if [ "$apiservers" -gt 1 ]; then
        start_front "$dir" "${names[@]}"
    else
        cp "$dir/url-kube-apiserver" "$dir/server"
    fi
    server=$(cat "$dir/server")

    kubeconfig "$dir/kubeconfig" "$server" "$pki" admin
    kubeconfig "$dir/controller-manager.kubeconfig" "$server" "$pki" controller-manager
    kubeconfig "$dir/scheduler.kubeconfig" "$server" "$pki" scheduler

    start "$dir" kube-controller-manager "$bin_dir/kube-controller-manager" \
        --kubeconfig "$dir/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port 0 \
        --use-service-account-credentials \
        --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
        --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
        --kube-api-qps 500 --kube-api-burst 1000 \
        --leader-elect=false
    start "$dir" kube-scheduler "$bin_dir/kube-scheduler" \
        --kubeconfig "$dir/scheduler.kubeconfig" \
        --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
        --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
        --kube-api-qps 500 --kube-api-burst 1000
    cat "$modules/kwok.yaml" <(echo "---") "$modules/stages/node.yaml" <(echo "---") "$modules/stages/pod.yaml" \
        >"$dir/kwok-stages.yaml"
    start "$dir" kwok "$bin_dir/kwok" --kubeconfig "$dir/kubeconfig" --config "$dir/kwok-stages.yaml" \
        --manage-all-nodes=true --node-lease-duration-seconds 40 --server-address 127.0.0.1:0

    local i
    for i in $(seq 1 "$nodes"); do
        curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
            -X POST -H 'Content-Type: application/json' "$server/api/v1/nodes" \
            -d "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"kwok-node-$i\",\"labels\":{\"kubernetes.io/hostname\":\"kwok-node-$i\",\"kubernetes.io/os\":\"linux\",\"type\":\"kwok\"},\"annotations\":{\"kwok.x-k8s.io/node\":\"fake\"}}}" >/dev/null
    done
    wait_for "$nodes Ready nodes" 60 "$dir" nodes_ready "$dir" "$nodes"
    wait_for "the default service account" 60 "$dir" api "$dir" /api/v1/namespaces/default/serviceaccounts/default
    log "up in $((SECONDS - started))s: KUBECONFIG=$dir/kubeconfig"
}

down() {
    local dir="$1"
    [ -f "$dir/pids" ] || return 0
    local pid name
    # The reverse order of their start: clients before the API server, etcd last.
    while read -r pid name; do
        kill "$pid" 2>/dev/null || true
    done < <(tac "$dir/pids")
    # A throwaway control plane: its API server drains for about 12 s and etcd waits on it,
    # which keeps nothing worth keeping; what has not exited after 2 s is killed.
    local deadline=$((SECONDS + 2))
    while read -r pid name; do
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.1
        done
    done <"$dir/pids"
    rm -f "$dir/pids"
}

[ $# -ge 1 ] || usage
command="$1"
shift
if [ "$command" = build ]; then
    build
    exit 0
fi
[ $# -ge 1 ] || usage
dir="$1"
shift
case "$command" in
up)
    nodes=3
    compaction=5m
    apiservers=1
    while [ $# -gt 0 ]; do
        case "$1" in
        --nodes)
            [ $# -ge 2 ] || usage
            nodes="$2"
            shift 2
            ;;
        --etcd-compaction-interval)
            [ $# -ge 2 ] || usage
            compaction="$2"
            shift 2
            ;;
        --apiservers)
            [ $# -ge 2 ] && [[ "$2" =~ ^[1-9]$ ]] || usage
            apiservers="$2"
            shift 2
            ;;
        *) usage ;;
        esac
    done
    up "$dir" "$nodes" "$compaction" "$apiservers"
    ;;
cut)
    [ $# -eq 0 ] || usage
    cut_connections "$dir"
    ;;
lag)
    [ $# -eq 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || usage
    lag "$dir" "$1" "$2"
    ;;
restart)
    [ $# -eq 1 ] || usage
    kill_component "$dir" "$1"
    start_component "$dir" "$1"
    ;;
kill)
    [ $# -eq 1 ] || usage
    kill_component "$dir" "$1"
    ;;
start)
    [ $# -eq 1 ] || usage
    start_component "$dir" "$1"
    ;;
squeeze)
    [ $# -eq 2 ] || usage
    squeeze "$dir" "$1" "$2"
    ;;
unsqueeze)
    [ $# -eq 0 ] || usage
    unsqueeze "$dir"
    ;;
down)
    [ $# -eq 0 ] || usage
    down "$dir"
    ;;
*) usage ;;
esac
