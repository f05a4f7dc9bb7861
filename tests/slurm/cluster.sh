#!/usr/bin/env bash
# Start or stop a real one-node Slurm (slurmctld, slurmd, munged from Debian's packages) whose
# configuration and state live in one directory. Root only: slurmd runs jobs as their users.
#   cluster.sh start STATE_DIR   prints SLURM_CONF=... once the node is idle
#                                (STATE_DIR/slurm.extra.conf, if there, is added to slurm.conf)
#   cluster.sh stop STATE_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action=${1:?usage: cluster.sh start|stop STATE_DIR}
state=${2:?usage: cluster.sh start|stop STATE_DIR}
conf="$state/slurm.conf"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  local pidfile pid
  for pidfile in "$state/slurmd.pid" "$state/slurmctld.pid"; do
    if [[ -f "$pidfile" ]]; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

case "$action" in
  stop)
    stop
    exit 0
    ;;
  start) ;;
  *)
    echo "cluster.sh: unknown action $action" >&2
    exit 2
    ;;
esac

for tool in slurmctld slurmd munged munge unmunge sbatch scontrol sinfo; do
  command -v "$tool" >/dev/null || { echo "cluster.sh: $tool is not installed" >&2; exit 3; }
done
[[ $(id -u) -eq 0 ]] || { echo "cluster.sh: must run as root (slurmd runs jobs as their users)" >&2; exit 3; }

mkdir -p "$state/ctld" "$state/spool"
node=$(hostname -s)
sed -e "s|@NODE@|$node|g" -e "s|@STATE@|$state|g" -e "s|@CPUS@|$(nproc)|g" \
  -e "s|@CTLD_PORT@|$(free_port)|g" -e "s|@SLURMD_PORT@|$(free_port)|g" \
  "$here/slurm.conf.in" >"$conf"
# A test's own lines (a Prolog, its flags), written beside before the start: the daemons read
# PrologFlags only when they start
if [[ -f "$state/slurm.extra.conf" ]]; then
  cat "$state/slurm.extra.conf" >>"$conf"
fi
# slurmd checks cgroup.conf even with proctrack/linuxproc on some builds: an empty one is valid
printf "# no cgroup plugin in use: proctrack/linuxproc, task/none\n" >"$state/cgroup.conf"

# munge: one daemon per machine; start it unless one answers (a socket left by a daemon that
# has died answers nothing, and slurmctld would then refuse every request)
munge_answers() { timeout 10 munge -n </dev/null 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1; }
if ! munge_answers; then
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock /run/munge/munged.pid
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  chmod 400 /etc/munge/munge.key
  munged --force </dev/null >>"$state/daemons.out" 2>&1
  munge_answers || { echo "cluster.sh: munged does not answer; see $state/daemons.out" >&2; exit 3; }
fi

export SLURM_CONF="$conf"
# The daemons' own output goes to their log files: none may hold the caller's pipes open.
# Each is bounded: without a working munge, slurmctld took 49 s to start.
timeout 60 slurmctld -f "$conf" </dev/null >>"$state/daemons.out" 2>&1
timeout 60 slurmd -f "$conf" </dev/null >>"$state/daemons.out" 2>&1
# A wall-clock deadline, each sinfo bounded too: a controller that cannot be reached makes every
# call retry for seconds, and a count of tries alone once let this wait run for over an hour.
deadline=$((SECONDS + 60))
while ((SECONDS < deadline)); do
  if timeout 10 sinfo -h -n "$node" -o '%T' 2>/dev/null | grep -qx 'idle'; then
    echo "SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.2
done
echo "cluster.sh: the node did not become idle within 60 s; see $state/slurmctld.log and slurmd.log" >&2
timeout 10 sinfo -N -l >&2 || true
stop
exit 3
