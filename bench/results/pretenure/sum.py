import re,glob,sys,statistics as st
for f in sorted(glob.glob(sys.argv[1])):
    L=open(f).read().splitlines()
    rows=[];cur={}
    for l in L:
        m=re.match(r'(gateway|floor)\s+c=\d+:.*server\s+(\d+) µs/call.*other threads (\d+)\).*rss (\d+) MiB',l)
        if m: side=m.group(1); cur={'cpu':int(m.group(2)),'oth':int(m.group(3)),'rss':int(m.group(4))}; rows.append((side,cur)); continue
        m=re.match(r'(gateway|floor)\s+gc: scavenges ([\d.]+) per 10k.*promoted (\d+) KB.*\(([\d.]+) µs/call, helpers ([\d.]+) µs/call\); full (\d+)',l)
        if m: cur.update(sc=float(m.group(2)),prom=int(m.group(3)),pause=float(m.group(4)),help=float(m.group(5)),full=int(m.group(6)))
    g=[r for s,r in rows if s=='gateway'][1:]; fl=[r for s,r in rows if s=='floor'][1:]
    if not g: print(f,'no rows'); continue
    md=lambda xs,k: st.median([x[k] for x in xs])
    rng=lambda xs,k: f"{min(x[k] for x in xs)}-{max(x[k] for x in xs)}"
    print(f"{f.split('/')[-1]:22s} gw {md(g,'cpu'):.0f} fl {md(fl,'cpu'):.0f} ratio {md(g,'cpu')/md(fl,'cpu'):.2f} | gw prom {rng(g,'prom')} KB sc/10k {rng(g,'sc')} pause {rng(g,'pause')} help {rng(g,'help')} oth {rng(g,'oth')} rss {rng(g,'rss')} | fl prom {rng(fl,'prom')} rss {rng(fl,'rss')}")
