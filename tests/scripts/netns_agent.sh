#!/bin/sh
# Launch agent of the emulated hosts of tests/scripts/network_partition.py:
# Open MPI calls it as "netns_agent.sh [ssh options] HOST COMMAND..." to start
# its daemon on HOST; it runs COMMAND inside the network namespace that holds
# HOST's address, named ${HERD_AGENT_PREFIX:-herdpart}<HOST's last octet>.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
exec ip netns exec "${HERD_AGENT_PREFIX:-herdpart}${host##*.}" /bin/sh -c "$*"
