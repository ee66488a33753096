# Slurm: a real one-host cluster on loopback (Debian's slurm-wlm 22.05) for tests/bot/diagnosis/collectors/test_slurm*.
# Sourced by .ci/run under `set -euo pipefail`: no `exit`, idempotent, daemons started by PID file.
# Layout: partition `gpu` (default) = localhost with two fake H200 GPUs as GRES, plus two declared but
# absent nodes (listed BEFORE localhost) that stay DOWN, one drained with an Xid reason, to produce
# ReqNodeNotAvail; partition `maint` is DOWN (PartitionDown); partition `small` has tight limits.

_slurm_port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

_slurm_setup() {
  local conf_dir=/etc/slurm state_dir=/var/spool/slurmctld spool_dir=/var/spool/slurmd
  local log_dir=/var/log/slurm run_dir=/run/slurm dev_dir=/run/triage-fake-gpu
  local host restd_port=6820
  host="$(hostname -s)"

  if ! command -v slurmctld >/dev/null 2>&1 || ! command -v sinfo >/dev/null 2>&1 \
    || ! command -v munged >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
    || ! command -v slurmrestd >/dev/null 2>&1 || [ ! -e /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so ] \
    || ! command -v slurmdbd >/dev/null 2>&1 || ! command -v mariadbd >/dev/null 2>&1; then
    if ! apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin slurmdbd mariadb-server >/dev/null 2>&1; then
      apt-get update -q >/dev/null
      apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin slurmdbd mariadb-server >/dev/null
    fi
  fi

  # Already up and answering: nothing to do.
  if [ -s "$run_dir/slurmctld.pid" ] && kill -0 "$(cat "$run_dir/slurmctld.pid")" 2>/dev/null \
    && _slurm_port_open 6819 \
    && [ -s "$run_dir/slurmd.pid" ] && kill -0 "$(cat "$run_dir/slurmd.pid")" 2>/dev/null \
    && [ -s "$run_dir/slurmrestd.pid" ] && kill -0 "$(cat "$run_dir/slurmrestd.pid")" 2>/dev/null \
    && _slurm_port_open "$restd_port" && timeout 5 sinfo -h >/dev/null 2>&1; then
    export TRIAGE_TEST_SLURM=1 TRIAGE_TEST_SLURMRESTD_URL="http://127.0.0.1:$restd_port"
    return 0
  fi

  mkdir -p "$conf_dir" "$state_dir" "$spool_dir" "$log_dir" "$run_dir" "$dev_dir" /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  if ! { [ -s /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  fi

  # slurmrestd's JWT key (HS256): `scontrol token` signs with it.
  if [ ! -s "$state_dir/jwt_hs256.key" ]; then
    head -c 32 /dev/urandom >"$state_dir/jwt_hs256.key"
  fi
  chmod 0600 "$state_dir/jwt_hs256.key"

  # Fake GPU device files: GRES needs a File=; a character device node is enough (1,3 = /dev/null's).
  local index
  for index in 0 1; do
    [ -c "$dev_dir/nvidia$index" ] || mknod "$dev_dir/nvidia$index" c 1 3
  done

  cat >"$conf_dir/slurm.conf" <<EOF
# Written by .ci/setup.d/30-slurm.sh: a one-host test cluster on loopback.
ClusterName=triage-test
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=${state_dir}/jwt_hs256.key
StateSaveLocation=${state_dir}
SlurmdSpoolDir=${spool_dir}
SlurmctldPidFile=${run_dir}/slurmctld.pid
SlurmdPidFile=${run_dir}/slurmd.pid
SlurmctldLogFile=${log_dir}/slurmctld.log
SlurmdLogFile=${log_dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
MinJobAge=600
MaxJobCount=10000
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
MpiDefault=none
# Absent nodes first (slurmd on this host must not take their names); nothing listens on their port.
NodeName=gpu-absent-[1-2] NodeAddr=127.0.0.2 Port=6899 CPUs=8 RealMemory=4000 Gres=gpu:h200:8 State=DOWN
NodeName=localhost NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 Gres=gpu:h200:2 State=UNKNOWN
PartitionName=gpu Nodes=gpu-absent-[1-2],localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=maint Nodes=localhost MaxTime=INFINITE State=DOWN
PartitionName=small Nodes=localhost MaxNodes=1 MaxTime=00:10:00 State=UP
EOF
  cat >"$conf_dir/gres.conf" <<EOF
NodeName=gpu-absent-[1-2] Name=gpu Type=h200 File=${dev_dir}/nvidia[0-1] Count=8
NodeName=localhost Name=gpu Type=h200 File=${dev_dir}/nvidia[0-1]
EOF
  # No cgroup.conf: 22.05 autodetects (it has no CgroupPlugin=disabled), and the plugins above avoid cgroups.
  rm -f "$conf_dir/cgroup.conf"

  # Accounting: MariaDB (socket only) behind slurmdbd, so sacct answers and QOS limits apply.
  if ! mariadb -e "select 1" >/dev/null 2>&1; then
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    setsid /usr/sbin/mariadbd --user=mysql --skip-networking --pid-file=/run/mysqld/mysqld.pid \
      --socket=/run/mysqld/mysqld.sock >"$log_dir/mariadb.log" 2>&1 </dev/null &
    for attempt in $(seq 1 60); do
      mariadb -e "select 1" >/dev/null 2>&1 && break
      sleep 0.5
    done
  fi
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost'
    IDENTIFIED BY 'triage-test'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  printf '%s\n' "AuthType=auth/munge" "DbdHost=localhost" "DbdAddr=127.0.0.1" "SlurmUser=root" \
    "PidFile=${run_dir}/slurmdbd.pid" "LogFile=${log_dir}/slurmdbd.log" "StorageType=accounting_storage/mysql" \
    "StorageHost=localhost" "StorageUser=slurm" "StoragePass=triage-test" "StorageLoc=slurm_acct_db" \
    >"$conf_dir/slurmdbd.conf"
  chmod 0600 "$conf_dir/slurmdbd.conf"
  if ! { [ -s "$run_dir/slurmdbd.pid" ] && kill -0 "$(cat "$run_dir/slurmdbd.pid")" 2>/dev/null; }; then
    if ! /usr/sbin/slurmdbd; then
      echo "30-slurm.sh: slurmdbd did not start" >&2; tail -n 20 "$log_dir/slurmdbd.log" >&2 || true
      return 1
    fi
  fi
  for attempt in $(seq 1 60); do
    _slurm_port_open 6819 && break
    sleep 0.5
  done
  # Cluster, account, user, and a QOS allowing one job per user (to produce a QOS-limit pending reason).
  sacctmgr -i add cluster triage-test >/dev/null 2>&1 || true
  sacctmgr -i add account triage Cluster=triage-test Description=tests Organization=tests >/dev/null 2>&1 || true
  sacctmgr -i add qos onejob MaxJobsPerUser=1 >/dev/null 2>&1 || true
  sacctmgr -i add user root Account=triage Cluster=triage-test >/dev/null 2>&1 || true
  sacctmgr -i modify user root set QOS+=onejob >/dev/null 2>&1 || true

  if ! { [ -s "$run_dir/slurmctld.pid" ] && kill -0 "$(cat "$run_dir/slurmctld.pid")" 2>/dev/null; }; then
    if ! /usr/sbin/slurmctld -c -i; then
      echo "30-slurm.sh: slurmctld did not start" >&2; tail -n 20 "$log_dir/slurmctld.log" >&2 || true
      return 1
    fi
  fi
  if ! { [ -s "$run_dir/slurmd.pid" ] && kill -0 "$(cat "$run_dir/slurmd.pid")" 2>/dev/null; }; then
    if ! /usr/sbin/slurmd -N localhost; then
      # A cgroup-v2-only host without systemd: tell 22.05's cgroup/v2 plugin not to look for systemd, retry once.
      printf '%s\n' "CgroupPlugin=cgroup/v2" "IgnoreSystemd=yes" "IgnoreSystemdMissing=yes" >"$conf_dir/cgroup.conf"
      if ! /usr/sbin/slurmd -N localhost; then
        echo "30-slurm.sh: slurmd did not start" >&2; tail -n 20 "$log_dir/slurmd.log" >&2 || true
        return 1
      fi
    fi
  fi

  local attempt
  for attempt in $(seq 1 60); do
    if timeout 5 sinfo -h -n localhost -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      break
    fi
    sleep 0.5
  done
  if ! timeout 5 sinfo -h >/dev/null 2>&1; then
    echo "30-slurm.sh: slurmctld does not answer; see $log_dir/slurmctld.log" >&2
    tail -n 20 "$log_dir/slurmctld.log" >&2 || true
    return 1
  fi
  # slurmrestd refuses to run as root; setpriv execs it as nobody so the PID file names slurmrestd itself.
  if ! { [ -s "$run_dir/slurmrestd.pid" ] && kill -0 "$(cat "$run_dir/slurmrestd.pid")" 2>/dev/null \
    && _slurm_port_open "$restd_port"; }; then
    if [ -s "$run_dir/slurmrestd.pid" ]; then kill "$(cat "$run_dir/slurmrestd.pid")" 2>/dev/null || true; fi
    SLURM_JWT=daemon setsid setpriv --reuid=nobody --regid=nogroup --clear-groups \
      /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 "127.0.0.1:$restd_port" \
      >"$log_dir/slurmrestd.log" 2>&1 </dev/null &
    echo $! >"$run_dir/slurmrestd.pid"
    for attempt in $(seq 1 40); do
      _slurm_port_open "$restd_port" && break
      sleep 0.25
    done
    if ! _slurm_port_open "$restd_port"; then
      echo "30-slurm.sh: slurmrestd does not listen on $restd_port" >&2; tail -n 20 "$log_dir/slurmrestd.log" >&2 || true
      return 1
    fi
  fi
  # A drain reason that carries Xid text, as GPU health checks write them.
  scontrol update NodeName=gpu-absent-1 State=DRAIN \
    Reason="Xid 79 GPU has fallen off the bus (PCI:0000:3b:00)" >/dev/null 2>&1 || true
  scontrol update NodeName=gpu-absent-2 State=DOWN Reason="Not responding" >/dev/null 2>&1 || true
  export TRIAGE_TEST_SLURM=1 TRIAGE_TEST_SLURMRESTD_URL="http://127.0.0.1:$restd_port"
}

_slurm_setup
unset -f _slurm_setup _slurm_port_open
