cd /work/wt/pretenure
for i in 2 3 4; do for on in off on; do
 echo "=== bench fleet $on load $(cat /proc/loadavg) $(date -u +%T)"
 if [ $on = on ]; then VOXGATE_GATEWAY_NODE_ARGS=--no-allocation-site-pretenuring timeout 420 bash bench/run.sh --quick --only fleet --out /tmp/pt/pt-fleet-on-$i.json > /tmp/pt/bf-on-$i.txt 2>&1
 else timeout 420 bash bench/run.sh --quick --only fleet --out /tmp/pt/pt-fleet-off-$i.json > /tmp/pt/bf-off-$i.txt 2>&1; fi
 echo rc=$? $(date -u +%T)
done; done
