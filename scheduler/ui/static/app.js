// Caldera's built-in web view: reads the scheduler's /debug API and renders it with DOM and canvas.
// Plain JavaScript, no framework, no build step, nothing fetched from anywhere but the scheduler.
"use strict";

(function () {
  const params = new URLSearchParams(location.search);
  const REFRESH_MS = Math.max(250, 1000 * (parseFloat(params.get("refresh")) || 3));
  const RESOURCE_ORDER = ["cpu", "memory", "nvidia.com/gpu"];
  const state = {
    view: "queues",
    job: null,
    cycle: null,
    timer: null,
    inflight: null,
    queues: [],
    jobs: { state: "pending", queue: "", offset: 0, limit: 50 },
    nodes: { tier: params.get("group_by") || null, metric: "cpu", data: null },
  };

  // -- small helpers ------------------------------------------------------------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const $ = (id) => document.getElementById(id);

  function apiUrl(path) {
    // The page lives at <prefix>/ui/, the API at <prefix>/debug/: relative, so a path prefix works.
    return new URL("../debug/" + path, location.href).toString();
  }

  async function api(path, signal) {
    const res = await fetch(apiUrl(path), { signal, headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await res.json();
    } catch (e) {
      body = null;
    }
    if (!res.ok) {
      const err = new Error((body && body.error) || `${res.status} ${res.statusText}`);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (Math.abs(v) >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return v.toFixed(digits === undefined ? 1 : digits).replace(/\.0+$/, "");
  }

  function bytes(v) {
    if (v === null || v === undefined) return "–";
    const units = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) {
      x /= 1024;
      i++;
    }
    return num(x) + units[i];
  }

  function fmtRes(name, v) {
    if (name === "memory" || name.endsWith("memory") || name === "ephemeral-storage") return bytes(v);
    return num(v);
  }

  function shortRes(name) {
    if (name === "nvidia.com/gpu") return "GPU";
    const slash = name.lastIndexOf("/");
    return slash >= 0 ? name.slice(slash + 1) : name;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
    return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  }

  function when(unix) {
    if (!unix) return "–";
    const d = new Date(unix * 1000);
    return d.toLocaleString(undefined, { hour12: false });
  }

  function pct(used, total) {
    return total > 0 ? Math.max(0, used / total) : 0;
  }

  function resourceNames(maps) {
    const seen = new Set();
    for (const m of maps) if (m) for (const k of Object.keys(m)) seen.add(k);
    seen.delete("pods");
    return [...seen].sort((a, b) => {
      const ia = RESOURCE_ORDER.indexOf(a);
      const ib = RESOURCE_ORDER.indexOf(b);
      if (ia !== ib) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
      return a < b ? -1 : 1;
    });
  }

  // -- status line and errors ---------------------------------------------------------------------
  function setStatus(cycle) {
    if (cycle !== undefined && cycle !== null) state.cycle = cycle;
    const t = new Date().toLocaleTimeString(undefined, { hour12: false });
    $("status").textContent = `cycle ${state.cycle === null ? "–" : state.cycle} · updated ${t}`;
    $("status").dataset.cycle = state.cycle === null ? "" : String(state.cycle);
  }

  function showError(err) {
    const box = $("error");
    if (!err) {
      box.hidden = true;
      box.textContent = "";
      return;
    }
    box.hidden = false;
    box.textContent = `Cannot read the scheduler's debug API (${err.message}); showing the last figures received.`;
  }

  // -- Queues -------------------------------------------------------------------------------------
  function queueOrder(queues) {
    // Parents before children, children indented under their parent.
    const byParent = new Map();
    const names = new Set(queues.map((q) => q.name));
    for (const q of queues) {
      const p = q.parent && names.has(q.parent) && q.parent !== q.name ? q.parent : "";
      if (!byParent.has(p)) byParent.set(p, []);
      byParent.get(p).push(q);
    }
    const out = [];
    const visit = (parent, depth) => {
      const kids = (byParent.get(parent) || []).sort((a, b) => (a.name < b.name ? -1 : 1));
      for (const q of kids) {
        if (out.some((o) => o.q === q)) continue;
        out.push({ q, depth });
        visit(q.name, depth + 1);
      }
    };
    visit("", 0);
    for (const q of queues) if (!out.some((o) => o.q === q)) out.push({ q, depth: 0 });
    return out;
  }

  function queueBar(q, res, scale) {
    const v = (m) => (m && m[res] !== undefined ? m[res] : null);
    const alloc = v(q.allocated) || 0;
    // the part of "allocated" the last cycle pipelined (pending again next cycle)
    const piped = v(q.pipelined) || 0;
    const req = v(q.request) || 0;
    const des = v(q.deserved);
    const guar = v(q.guarantee);
    const cap = v(q.capability);
    const over = des !== null && alloc > des + 1e-9;
    const frac = (x) => `${Math.min(100, (100 * x) / scale)}%`;
    const bar = h("div", { class: "bar", title: barTitle(res, alloc, piped, req, des, guar, cap) });
    const reqFill = h("div", { class: "fill req" });
    reqFill.style.width = frac(req);
    const allocFill = h("div", { class: "fill alloc" });
    allocFill.style.width = frac(over ? des : alloc);
    bar.append(reqFill, allocFill);
    if (over) {
      const overFill = h("div", { class: "fill over" });
      overFill.style.left = frac(des);
      overFill.style.width = `${Math.max(0, Math.min(100, (100 * alloc) / scale) - (100 * des) / scale)}%`;
      bar.append(overFill);
    }
    for (const [cls, x] of [["des", des], ["guar", guar], ["cap", cap]]) {
      if (x === null || x === undefined || x <= 0) continue;
      const tick = h("div", { class: `tick ${cls}` });
      tick.style.left = frac(x);
      bar.append(tick);
    }
    const label = h(
      "div",
      { class: "barlabel" },
      h("span", { "data-field": `allocated.${res}`, text: fmtRes(res, alloc) }),
      " / ",
      h("span", { "data-field": `deserved.${res}`, text: des === null ? "–" : fmtRes(res, des) }),
      guar ? h("span", { class: "muted", text: ` · g ${fmtRes(res, guar)}` }) : null,
      piped ? h("span", { class: "muted", "data-field": `pipelined.${res}`, text: ` · p ${fmtRes(res, piped)}` }) : null,
    );
    return h("td", { class: over ? "res over" : "res" }, bar, label);
  }

  function barTitle(res, alloc, piped, req, des, guar, cap) {
    return [
      `${res}`,
      `allocated ${fmtRes(res, alloc)}` + (piped ? ` (${fmtRes(res, piped)} of it pipelined this cycle)` : ""),
      `requested ${fmtRes(res, req)}`,
      `deserved ${des === null ? "–" : fmtRes(res, des)}`,
      `guarantee ${guar === null || guar === undefined ? "–" : fmtRes(res, guar)}`,
      `capability ${cap === null || cap === undefined ? "unlimited" : fmtRes(res, cap)}`,
    ].join("\n");
  }

  async function renderQueues(signal) {
    const data = await api("queues", signal);
    setStatus(data.cycle);
    const queues = data.queues || [];
    state.queues = queues.map((q) => q.name).sort();
    fillQueueSelect();
    const resources = resourceNames(
      queues.flatMap((q) => [q.deserved, q.allocated, q.request, q.guarantee, q.capability]),
    );
    const scale = {};
    for (const r of resources) {
      let m = 0;
      for (const q of queues) {
        for (const src of [q.deserved, q.allocated, q.request, q.guarantee, q.capability]) {
          if (src && typeof src[r] === "number") m = Math.max(m, src[r]);
        }
      }
      scale[r] = m > 0 ? m : 1;
    }
    const overused = queues.filter((q) => q.overused).length;
    const closed = queues.filter((q) => (q.state || "Open") !== "Open").length;
    $("queues-summary").textContent =
      `${queues.length} queues` + (overused ? ` · ${overused} overused` : "") + (closed ? ` · ${closed} not open` : "");
    const head = h(
      "tr",
      null,
      h("th", { text: "Queue" }),
      h("th", { text: "State" }),
      h("th", { class: "num", text: "Weight" }),
      h("th", { class: "num", text: "Share" }),
      h("th", { class: "num", title: "pending / inqueue / running jobs", text: "Jobs p/i/r" }),
      resources.map((r) => h("th", { class: "res", title: r, text: `${shortRes(r)} allocated / deserved` })),
    );
    const rows = queueOrder(queues).map(({ q, depth }) => {
      const st = q.state || "Open";
      const jobs = q.jobs || {};
      const badges = [];
      if (q.overused) badges.push(h("span", { class: "badge over", text: "overused" }));
      if (st !== "Open") badges.push(h("span", { class: "badge closed", text: st.toLowerCase() }));
      const name = h("td", { class: "name" }, h("span", { "data-field": "name", text: q.name }), ...badges);
      name.style.paddingLeft = `${0.5 + depth * 1.2}em`;
      const share = h("td", { class: "num" }, h("span", { "data-field": "share", text: num(q.share, 2) }));
      const shareBar = h("div", { class: "minibar" + (q.share > 1 ? " over" : "") });
      const shareFill = h("div");
      shareFill.style.width = `${Math.min(100, 100 * (q.share || 0))}%`;
      shareBar.append(shareFill);
      share.append(shareBar);
      return h(
        "tr",
        {
          "data-queue": q.name,
          class: [q.overused ? "overused" : "", st !== "Open" ? "closed" : ""].join(" ").trim() || null,
        },
        name,
        h("td", { "data-field": "state", text: st }),
        h("td", { class: "num", "data-field": "weight", text: num(q.weight) }),
        share,
        h(
          "td",
          { class: "num" },
          h("span", { "data-field": "jobs.pending", text: jobs.pending || 0 }),
          " / ",
          h("span", { "data-field": "jobs.inqueue", text: jobs.inqueue || 0 }),
          " / ",
          h("span", { "data-field": "jobs.running", text: jobs.running || 0 }),
        ),
        resources.map((r) => queueBar(q, r, scale[r])),
      );
    });
    $("queues-body").replaceChildren(
      h("table", { class: "grid queues", id: "queues-table" }, h("thead", null, head), h("tbody", null, rows)),
    );
  }

  function fillQueueSelect() {
    const sel = $("jobs-queue");
    const want = ["", ...state.queues];
    const have = [...sel.options].map((o) => o.value);
    if (want.join("\n") === have.join("\n")) return;
    sel.replaceChildren(
      h("option", { value: "", text: "all queues" }),
      ...state.queues.map((q) => h("option", { value: q, text: q })),
    );
    sel.value = state.jobs.queue;
  }

  // -- Jobs ---------------------------------------------------------------------------------------
  async function renderJobs(signal) {
    if (!state.queues.length) {
      try {
        const qs = await api("queues", signal);
        state.queues = (qs.queues || []).map((q) => q.name).sort();
        fillQueueSelect();
      } catch (e) {
        if (e.name === "AbortError") throw e;
      }
    }
    const j = state.jobs;
    const q = new URLSearchParams({ state: j.state, offset: String(j.offset), limit: String(j.limit) });
    if (j.queue) q.set("queue", j.queue);
    const data = await api("jobs?" + q.toString(), signal);
    setStatus(data.cycle);
    const total = data.total || 0;
    if (j.offset > 0 && j.offset >= total) {
      // The page we were on emptied out (jobs started or finished): go back to the last page.
      j.offset = Math.max(0, Math.floor((total - 1) / j.limit) * j.limit);
      return renderJobs(signal);
    }
    const jobs = data.jobs || [];
    $("jobs-summary").textContent = `${total} ${j.state === "all" ? "" : j.state + " "}${total === 1 ? "job" : "jobs"}` + (j.queue ? ` in ${j.queue}` : "");
    $("jobs-summary").dataset.total = String(total);
    $("jobs-range").textContent = total ? `${j.offset + 1}–${j.offset + jobs.length} of ${total}` : "none";
    $("jobs-prev").disabled = j.offset <= 0;
    $("jobs-next").disabled = j.offset + jobs.length >= total;
    const showReason = j.state !== "running";
    const head = h(
      "tr",
      null,
      h("th", { text: "Job" }),
      h("th", { text: "Queue" }),
      h("th", { class: "num", text: "Priority" }),
      h("th", { class: "num", text: "Min member" }),
      h("th", { text: "Phase" }),
      h("th", { class: "num", title: "pending / bound / running / succeeded / failed tasks", text: "Tasks p/b/r/s/f" }),
      h("th", { class: "num", text: "Age" }),
      showReason ? h("th", { text: "Why pending" }) : null,
    );
    const rows = jobs.map((job) => {
      const t = job.tasks || {};
      const key = `${job.namespace}/${job.name}`;
      // A pod that no cycle can see (its spec cannot be read) is listed as itself, linked to its own page.
      const page = job.kind === "pod" ? "pod" : "job";
      const pending = (job.phase || "").toLowerCase() === "pending" || (t.pending || 0) > 0;
      return h(
        "tr",
        { "data-job": key, "data-kind": page, "data-problem": job.problem || null },
        h(
          "td",
          { class: "name" },
          // a Kubernetes scheduling.k8s.io/v1alpha2 PodGroup: its job key's name carries "k8s:"
          h("a", { href: `#${page}/${encodeURIComponent(job.namespace)}/${encodeURIComponent(job.native ? `k8s:${job.name}` : job.name)}`, text: page === "pod" ? `pod ${key}` : key }),
          job.native ? h("span", { class: "badge", "data-field": "native", title: "scheduling.k8s.io/v1alpha2 PodGroup", text: "native" }) : null,
        ),
        h("td", { "data-field": "queue", text: job.queue }),
        h("td", { class: "num", "data-field": "priority", text: job.priority }),
        h("td", { class: "num", "data-field": "min_member", text: job.min_member }),
        h("td", { "data-field": "phase", text: job.phase }),
        h("td", { class: "num", text: [t.pending, t.bound, t.running, t.succeeded, t.failed].map((x) => x || 0).join("/") }),
        h("td", { class: "num", "data-field": "age", title: job.created || "", text: age(job.age_seconds) }),
        showReason
          ? h(
              "td",
              { class: "reason" },
              pending && job.reason ? h("span", { "data-field": "reason", text: job.reason }) : null,
              pending
                ? h("a", {
                    class: "explain",
                    href: `#${page}/${encodeURIComponent(job.namespace)}/${encodeURIComponent(job.name)}`,
                    text: "explain ›",
                  })
                : null,
            )
          : null,
      );
    });
    $("jobs-body").replaceChildren(
      rows.length
        ? h("table", { class: "grid jobs", id: "jobs-table" }, h("thead", null, head), h("tbody", null, rows))
        : h("p", { class: "empty", text: "No jobs here." }),
    );
  }

  // -- One job's explanation ----------------------------------------------------------------------
  function kv(pairs) {
    return h(
      "dl",
      { class: "kv" },
      pairs.filter(Boolean).map(([k, v, field]) => [h("dt", { text: k }), h("dd", { "data-field": field || null }, v)]),
    );
  }

  async function renderPod(signal) {
    const [ns, name] = state.job;
    const body = $("job-body");
    let ex;
    try {
      ex = await api(`pods/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, signal);
    } catch (e) {
      if (e.status === 404) {
        body.replaceChildren(h("h1", { text: `pod ${ns}/${name}` }), h("p", { class: "empty", text: `No such pod: ${e.message}` }));
        return;
      }
      throw e;
    }
    setStatus(ex.cycle);
    const parts = [h("h1", null, `pod ${ex.namespace}/${ex.name} `, h("small", { text: ex.status || "" }))];
    if (ex.reason) parts.push(h("p", { class: "reason big", id: "job-reason", text: ex.reason }));
    if (ex.suggestion) parts.push(h("p", { class: "suggestion", id: "job-suggestion" }, h("b", { text: "Suggestion: " }), ex.suggestion));
    if (ex.devices) parts.push(...devicesTable(ex.devices));
    const [jns, jname] = (ex.job || "").split("/");
    parts.push(
      h(
        "div",
        { class: "cards" },
        h(
          "div",
          { class: "card" },
          h("h2", { text: "Pod" }),
          kv([
            ["status", ex.status || "–", "status"],
            ["node", ex.node || "–", "node"],
            ["job", ex.job && jname ? h("a", { href: `#job/${encodeURIComponent(jns)}/${encodeURIComponent(jname)}`, text: ex.job }) : "–", "job"],
            ex.job_reason && ex.job_reason !== ex.reason ? ["job's reason", ex.job_reason] : null,
          ]),
        ),
      ),
    );
    body.replaceChildren(...parts);
  }

  async function renderJob(signal) {
    if (state.jobKind === "pod") return renderPod(signal);
    const [ns, name] = state.job;
    const body = $("job-body");
    let ex;
    try {
      ex = await api(`jobs/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`, signal);
    } catch (e) {
      if (e.status === 404) {
        body.replaceChildren(h("h1", { text: `${ns}/${name}` }), h("p", { class: "empty", text: `No such job: ${e.message}` }));
        return;
      }
      throw e;
    }
    setStatus(ex.cycle);
    const parts = [h("h1", null, `${ex.namespace}/${ex.name} `, h("small", { text: ex.phase || "" }), ex.native ? h("span", { class: "badge", id: "job-native", title: "scheduling.k8s.io/v1alpha2 PodGroup", text: "native" }) : null)];
    if (ex.reason) parts.push(h("p", { class: "reason big", id: "job-reason", text: ex.reason }));
    if (ex.suggestion) parts.push(h("p", { class: "suggestion", id: "job-suggestion" }, h("b", { text: "Suggestion: " }), ex.suggestion));
    if (ex.gated && ex.gated.length)
      parts.push(
        h(
          "ul",
          { class: "gated", id: "job-gated" },
          ...ex.gated.map((g) => h("li", { text: `pod ${g.pod} waits for scheduling gates: ${(g.gates || []).join(", ")}` })),
        ),
      );
    const qs = ex.queue_state || {};
    const g = ex.gang || {};
    parts.push(
      h(
        "div",
        { class: "cards" },
        h(
          "div",
          { class: "card" },
          h("h2", { text: "Gang" }),
          kv([
            ["min member", g.min_member, "gang.min_member"],
            ["ready", g.ready, "gang.ready"],
            ["pipelined", g.pipelined],
            ["pending", g.pending, "gang.pending"],
            ["valid", g.valid],
            g.min_task_member && Object.keys(g.min_task_member).length
              ? ["per role", Object.entries(g.min_task_member).map(([r, n]) => `${r}: ${n}`).join(", ")]
              : null,
          ]),
        ),
        h(
          "div",
          { class: "card" },
          h("h2", { text: "Queue" }),
          kv([
            ["name", qs.name || ex.queue, "queue"],
            ["state", qs.state || "–"],
            ["held back", qs.held ? "yes" : "no"],
            qs.message ? ["why", qs.message] : null,
          ]),
        ),
      ),
    );
    const roles = ex.roles || [];
    if (roles.length) {
      parts.push(h("h2", { text: "Roles" }));
      parts.push(
        h(
          "table",
          { class: "grid", id: "job-roles" },
          h(
            "thead",
            null,
            h("tr", null, ["Role", "Pending", "Request", "Nodes", "Feasible", "Why not the others"].map((t) => h("th", { text: t }))),
          ),
          h(
            "tbody",
            null,
            roles.map((r) =>
              h(
                "tr",
                { "data-role": r.role },
                h("td", { text: r.role }),
                h("td", { class: "num", text: r.pending }),
                h("td", { text: Object.entries(r.request || {}).map(([k, v]) => `${shortRes(k)} ${fmtRes(k, v)}`).join(", ") }),
                h("td", { class: "num", text: r.nodes }),
                h("td", { class: "num", "data-field": "feasible", text: r.feasible }),
                h("td", null, predicateBars(r.predicates || {}, r.nodes || 0)),
              ),
            ),
          ),
        ),
      );
    }
    const dev = ex.devices;
    if (dev) parts.push(...devicesTable(dev));
    const topo = ex.topology;
    if (topo) {
      parts.push(h("h2", { text: `Topology (${topo.mode}, up to tier ${topo.highest_tier})` }));
      parts.push(
        h(
          "table",
          { class: "grid", id: "job-topology" },
          h("thead", null, h("tr", null, ["Group", "Tier", "Outcome", "Shortfall"].map((t) => h("th", { text: t })))),
          h(
            "tbody",
            null,
            (topo.groups || []).map((gr) =>
              h(
                "tr",
                { class: `outcome-${gr.outcome}` },
                h("td", { text: gr.name }),
                h("td", { class: "num", text: gr.tier }),
                h("td", { text: gr.outcome }),
                h("td", { text: gr.shortfall || "" }),
              ),
            ),
          ),
        ),
      );
    }
    parts.push(h("details", null, h("summary", { text: "Raw explanation (JSON)" }), h("pre", { text: JSON.stringify(ex, null, 2) })));
    body.replaceChildren(...parts);
  }

  // The cluster's DRA devices of the classes a job's claims ask for, and of their drivers (/debug's
  // `devices`): one row each, "N devices, M allocated".
  function devicesTable(dev) {
    const rows = [
      ...(dev.classes || []).map((c) => ({ kind: "class", name: c.class, devices: c.devices, allocated: c.allocated, missing: c.missing })),
      ...(dev.drivers || []).map((d) => ({ kind: "driver", name: d.driver, devices: d.devices, allocated: d.allocated })),
    ];
    return [
      h("h2", { text: "Devices" }),
      h(
        "table",
        { class: "grid", id: "job-devices" },
        h("thead", null, h("tr", null, ["", "Name", "Devices", "Allocated", "Free"].map((t) => h("th", { text: t })))),
        h(
          "tbody",
          null,
          rows.map((r) =>
            h(
              "tr",
              { "data-kind": r.kind, "data-name": r.name },
              h("td", { text: r.kind === "class" ? "DeviceClass" : "driver" }),
              h("td", { text: r.name }),
              h("td", { class: "num", "data-field": "devices", text: r.missing ? "class does not exist" : r.devices }),
              h("td", { class: "num", "data-field": "allocated", text: r.allocated }),
              h("td", { class: "num", "data-field": "free", text: r.missing ? "–" : r.devices - r.allocated }),
            ),
          ),
        ),
      ),
    ];
  }

  // DRA devices of a set of nodes, per driver: [allocated, devices], as usageLine takes them.
  function devicePairs(nodes) {
    const out = {};
    for (const n of nodes) {
      for (const d of n.devices || []) {
        const p = (out[d.driver] = out[d.driver] || [0, 0]);
        p[0] += d.allocated;
        p[1] += d.devices;
      }
    }
    return Object.entries(out).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  }

  function deviceLines(nodes) {
    return devicePairs(nodes).map(([driver, pair]) => {
      const line = usageLine(`${driver} devices`, pair, "devices");
      line.dataset.driver = driver;
      return line;
    });
  }

  function predicateBars(predicates, nodes) {
    const entries = Object.entries(predicates).sort((a, b) => b[1] - a[1]);
    if (!entries.length) return "–";
    return h(
      "div",
      { class: "preds" },
      entries.map(([why, n]) => {
        const bar = h("div", { class: "minibar" });
        const fill = h("div");
        fill.style.width = `${nodes ? Math.min(100, (100 * n) / nodes) : 0}%`;
        bar.append(fill);
        return h("div", { class: "pred" }, bar, h("span", { class: "num", text: n }), h("span", { text: why }));
      }),
    );
  }

  // -- Nodes --------------------------------------------------------------------------------------
  const GAP = 2;
  // Small groups get big cells (a gang's fragmentation is visible at a glance); big ones stay compact.
  const cellFor = (n) => (n <= 64 ? 18 : n <= 256 ? 13 : 9);

  function heatColour(f) {
    // white-ish (idle) → amber → deep red (full): a full node stands out, and so does a fragmented group.
    const stops = [
      [0, [232, 240, 247]],
      [0.5, [253, 186, 80]],
      [1, [189, 0, 38]],
    ];
    const x = Math.max(0, Math.min(1, f));
    for (let i = 1; i < stops.length; i++) {
      if (x <= stops[i][0]) {
        const [x0, c0] = stops[i - 1];
        const [x1, c1] = stops[i];
        const t = (x - x0) / (x1 - x0);
        const c = c0.map((v, k) => Math.round(v + t * (c1[k] - v)));
        return `rgb(${c[0]},${c[1]},${c[2]})`;
      }
    }
    return "rgb(189,0,38)";
  }

  function drawHeat(canvas, nodes, metric, wrapWidth) {
    const CELL = cellFor(nodes.length);
    canvas._cell = CELL;
    const width = wrapWidth || canvas.parentElement.clientWidth || 600;
    const cols = Math.max(1, Math.floor((width - GAP) / (CELL + GAP)));
    const rows = Math.max(1, Math.ceil(nodes.length / cols));
    const dpr = window.devicePixelRatio || 1;
    const cssW = Math.min(width, cols * (CELL + GAP) + GAP);
    const cssH = rows * (CELL + GAP) + GAP;
    canvas.style.width = `${cssW}px`;
    canvas.style.height = `${cssH}px`;
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    canvas._cols = cols;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      const x = GAP + (i % cols) * (CELL + GAP);
      const y = GAP + Math.floor(i / cols) * (CELL + GAP);
      const pair = n[metric];
      if (!n.ready) ctx.fillStyle = "#555";
      else if (!pair || !pair[1]) ctx.fillStyle = "#f4f4f4";
      else ctx.fillStyle = heatColour(pct(pair[0], pair[1]));
      ctx.fillRect(x, y, CELL, CELL);
      if (n.unschedulable) {
        ctx.strokeStyle = "#1d4ed8";
        ctx.lineWidth = 2;
        ctx.strokeRect(x + 1, y + 1, CELL - 2, CELL - 2);
      }
      if (!pair || !pair[1]) {
        ctx.strokeStyle = "#ddd";
        ctx.lineWidth = 1;
        ctx.strokeRect(x + 0.5, y + 0.5, CELL - 1, CELL - 1);
      }
    }
  }

  function sumPair(nodes, metric) {
    let used = 0;
    let total = 0;
    let any = false;
    for (const n of nodes) {
      const p = n[metric];
      if (!p) continue;
      any = true;
      used += p[0];
      total += p[1];
    }
    return any ? [used, total] : null;
  }

  function usageLine(label, pair, res) {
    if (!pair) return null;
    const f = pct(pair[0], pair[1]);
    const bar = h("div", { class: "minibar" });
    const fill = h("div");
    fill.style.width = `${Math.min(100, 100 * f)}%`;
    fill.style.background = heatColour(f);
    bar.append(fill);
    return h(
      "div",
      { class: "usage", "data-usage": res },
      h("span", { class: "ulabel", text: label }),
      bar,
      h("span", { class: "num", text: `${fmtRes(res, pair[0])} / ${fmtRes(res, pair[1])} (${Math.round(100 * f)}%)` }),
    );
  }

  function nodeTip(canvas, group, ev) {
    const tip = $("node-tip");
    const CELL = canvas._cell || 9;
    const rect = canvas.getBoundingClientRect();
    const col = Math.floor((ev.clientX - rect.left - GAP) / (CELL + GAP));
    const row = Math.floor((ev.clientY - rect.top - GAP) / (CELL + GAP));
    const i = row * (canvas._cols || 1) + col;
    const n = col >= 0 && col < (canvas._cols || 1) ? group.nodes[i] : null;
    if (!n) {
      tip.hidden = true;
      return;
    }
    const line = (res, key) => (n[key] ? `${shortRes(res)} ${fmtRes(res, n[key][0])} / ${fmtRes(res, n[key][1])}` : null);
    tip.replaceChildren(
      h("b", { text: n.name }),
      ...[line("cpu", "cpu"), line("memory", "memory"), line("nvidia.com/gpu", "gpu")]
        .filter(Boolean)
        .map((t) => h("div", { text: t })),
      ...(n.devices || []).map((d) =>
        h("div", { "data-driver": d.driver, text: `${d.driver}: ${d.allocated} / ${d.devices} devices allocated` }),
      ),
      !n.ready ? h("div", { class: "bad", text: "not ready" }) : null,
      n.unschedulable ? h("div", { class: "bad", text: "unschedulable" }) : null,
    );
    tip.hidden = false;
    tip.style.left = `${ev.pageX + 12}px`;
    tip.style.top = `${ev.pageY + 12}px`;
  }

  async function renderNodes(signal) {
    const nq = state.nodes;
    const data = await api("nodes" + (nq.tier ? `?group_by=${encodeURIComponent(nq.tier)}` : ""), signal);
    setStatus(data.cycle);
    nq.data = data;
    const tiers = data.tiers || [];
    const sel = $("nodes-tier");
    const want = tiers.map(String);
    if ([...sel.options].map((o) => o.value).join("\n") !== want.join("\n")) {
      sel.replaceChildren(...want.map((t) => h("option", { value: t, text: t })));
    }
    const groupsAll = data.groups || [];
    const named = groupsAll.find((g) => g.name);
    let shownTier = nq.tier || "";
    if (!shownTier && named) {
      // A group's tier is a label key or a HyperNode tier number (1 = narrowest, as in `tiers`).
      const t = named.tier;
      shownTier = want.includes(String(t)) ? String(t) : Number.isInteger(t) && want[t - 1] ? want[t - 1] : "";
    }
    if (!shownTier) shownTier = want[0] || "";
    if (shownTier && want.includes(shownTier)) sel.value = shownTier;
    sel.disabled = want.length === 0;
    paintNodes();
  }

  function paintNodes() {
    const data = state.nodes.data;
    if (!data) return;
    const metric = state.nodes.metric;
    const groups = [...(data.groups || [])].sort((a, b) => {
      if (!a.name !== !b.name) return a.name ? -1 : 1; // the ungrouped nodes last
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    const all = groups.flatMap((g) => g.nodes || []);
    const notReady = all.filter((n) => !n.ready).length;
    const cordoned = all.filter((n) => n.unschedulable).length;
    $("nodes-summary").textContent =
      `${all.length} nodes in ${groups.filter((g) => g.name).length} groups` +
      (notReady ? ` · ${notReady} not ready` : "") +
      (cordoned ? ` · ${cordoned} unschedulable` : "");
    $("nodes-summary").dataset.nodes = String(all.length);
    const total = h(
      "div",
      { class: "card wide", id: "nodes-total" },
      h("h2", { text: "Cluster" }),
      usageLine("cpu", sumPair(all, "cpu"), "cpu"),
      usageLine("memory", sumPair(all, "memory"), "memory"),
      usageLine("GPU", sumPair(all, "gpu"), "nvidia.com/gpu"),
      ...deviceLines(all),
    );
    const LIMIT = 400;
    const cards = groups.slice(0, LIMIT).map((g) => {
      const nodes = g.nodes || [];
      const idle = nodes.filter((n) => n.ready && !n.unschedulable && n.cpu && n.cpu[0] <= 0).length;
      const canvas = h("canvas", { class: "heat", role: "img", "aria-label": `${nodes.length} nodes of ${g.name || "no group"}` });
      canvas.addEventListener("mousemove", (ev) => nodeTip(canvas, g, ev));
      canvas.addEventListener("mouseleave", () => ($("node-tip").hidden = true));
      const card = h(
        "div",
        { class: "card group", "data-group": g.name, "data-tier": g.tier, "data-count": nodes.length },
        h(
          "h2",
          null,
          h("span", { "data-field": "name", text: g.name || "(in no group)" }),
          " ",
          h("small", null, h("span", { "data-field": "count", text: nodes.length }), ` nodes · ${idle} idle`),
        ),
        usageLine("cpu", sumPair(nodes, "cpu"), "cpu"),
        usageLine("memory", sumPair(nodes, "memory"), "memory"),
        usageLine("GPU", sumPair(nodes, "gpu"), "nvidia.com/gpu"),
        ...deviceLines(nodes),
        h("div", { class: "heatwrap" }, canvas),
      );
      card._draw = (m, w) => drawHeat(canvas, nodes, m, w);
      return card;
    });
    const more = groups.length > LIMIT ? h("p", { class: "empty", text: `${groups.length - LIMIT} more groups not shown.` }) : null;
    const grid = h("div", { class: "groups", id: "node-groups" }, cards);
    $("nodes-body").replaceChildren(total, grid, more || "");
    state.nodes.cards = cards;
    redrawHeat();
  }

  function redrawHeat() {
    // Every group's card has the same width: read it once, so drawing 400 canvases forces one layout.
    const cards = state.nodes.cards || [];
    const metric = state.nodes.metric;
    const wrap = cards.length ? cards[0].querySelector(".heatwrap") : null;
    const width = wrap ? wrap.clientWidth : 0;
    for (const c of cards) c._draw(metric, width);
    $("nodes-body").dataset.metric = metric === "gpu" ? "nvidia.com/gpu" : metric;
  }

  // -- Scheduler ----------------------------------------------------------------------------------
  function drawCycles(canvas, cycles) {
    const width = canvas.parentElement.clientWidth || 800;
    const height = 220;
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const pad = { l: 48, r: 56, t: 12, b: 28 };
    const W = width - pad.l - pad.r;
    const H = height - pad.t - pad.b;
    ctx.font = "11px sans-serif";
    ctx.fillStyle = "#666";
    if (!cycles.length) {
      ctx.fillText("no cycles yet", pad.l + 8, pad.t + 20);
      return;
    }
    const t1 = cycles[cycles.length - 1].at;
    const t0 = Math.min(cycles[0].at, t1 - 10);
    const span = Math.max(1, t1 - t0);
    const xOf = (t) => pad.l + ((t - t0) / span) * W;
    // Throughput: pods bound per second in buckets of ~1/60 of the window.
    const bucket = Math.max(1, span / 60);
    const buckets = new Map();
    for (const c of cycles) {
      const k = Math.floor((c.at - t0) / bucket);
      buckets.set(k, (buckets.get(k) || 0) + (c.bound || 0));
    }
    let maxRate = 0;
    for (const v of buckets.values()) maxRate = Math.max(maxRate, v / bucket);
    const rateTop = niceCeil(maxRate || 1);
    let maxMs = 0;
    for (const c of cycles) maxMs = Math.max(maxMs, c.duration_ms || 0);
    const msTop = niceCeil(maxMs || 1);
    // grid + axes
    ctx.strokeStyle = "#e5e7eb";
    ctx.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = pad.t + (H * i) / 4 + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.l, y);
      ctx.lineTo(pad.l + W, y);
      ctx.stroke();
      ctx.fillStyle = "#2563eb";
      ctx.textAlign = "right";
      ctx.fillText(num((msTop * (4 - i)) / 4), pad.l - 6, y + 4);
      ctx.fillStyle = "#15803d";
      ctx.textAlign = "left";
      ctx.fillText(num((rateTop * (4 - i)) / 4), pad.l + W + 6, y + 4);
    }
    ctx.save();
    ctx.fillStyle = "#2563eb";
    ctx.translate(12, pad.t + H / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.fillText("cycle ms", 0, 0);
    ctx.restore();
    ctx.save();
    ctx.fillStyle = "#15803d";
    ctx.translate(width - 10, pad.t + H / 2);
    ctx.rotate(Math.PI / 2);
    ctx.textAlign = "center";
    ctx.fillText("pods bound / s", 0, 0);
    ctx.restore();
    // time ticks
    ctx.fillStyle = "#666";
    ctx.textAlign = "center";
    for (let i = 0; i <= 4; i++) {
      const t = t0 + (span * i) / 4;
      ctx.fillText(`-${age(t1 - t)}`.replace("-0s", "now"), xOf(t), height - 8);
    }
    // throughput bars (the newest bucket may reach past "now": clip to the plot)
    ctx.save();
    ctx.beginPath();
    ctx.rect(pad.l, pad.t, W, H);
    ctx.clip();
    ctx.fillStyle = "rgba(21,128,61,0.35)";
    const bw = Math.max(1, (bucket / span) * W - 1);
    for (const [k, v] of buckets) {
      const rate = v / bucket;
      const bh = (rate / rateTop) * H;
      ctx.fillRect(xOf(t0 + k * bucket), pad.t + H - bh, bw, bh);
    }
    ctx.restore();
    // latency line
    ctx.strokeStyle = "#2563eb";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    cycles.forEach((c, i) => {
      const x = xOf(c.at);
      const y = pad.t + H - ((c.duration_ms || 0) / msTop) * H;
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    });
    ctx.stroke();
    if (cycles.length < 120) {
      ctx.fillStyle = "#2563eb";
      for (const c of cycles) {
        ctx.beginPath();
        ctx.arc(xOf(c.at), pad.t + H - ((c.duration_ms || 0) / msTop) * H, 2.5, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function quantile(sorted, q) {
    if (!sorted.length) return null;
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  }

  async function renderScheduler(signal) {
    const s = await api("scheduler", signal);
    setStatus(s.cycle);
    const cycles = s.cycles || [];
    const conf = s.conf || {};
    const rel = conf.last_reload || null;
    const durations = cycles.map((c) => c.duration_ms || 0).sort((a, b) => a - b);
    const span = cycles.length > 1 ? cycles[cycles.length - 1].at - cycles[0].at : 0;
    const bound = cycles.reduce((a, c) => a + (c.bound || 0), 0);
    const last = cycles.length ? cycles[cycles.length - 1] : null;
    $("scheduler-summary").textContent = s.leader ? "leading" : "standby";
    const leaderText = s.leader_identity || "–";
    const canvas = h("canvas", { id: "cycles-chart", role: "img", "aria-label": "cycle latency and throughput" });
    const cards = h(
      "div",
      { class: "cards" },
      h(
        "div",
        { class: "card" },
        h("h2", { text: "Leadership" }),
        kv([
          ["this replica", s.identity || "–", "identity"],
          ["leader", leaderText, "leader_identity"],
          ["role", s.leader ? "leader" : "standby", "role"],
          ["cycle", s.cycle, "cycle"],
        ]),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", { text: `Cycles (last ${cycles.length})` }),
        kv([
          ["last", last ? `${num(last.duration_ms, 2)} ms` : "–", "last_ms"],
          ["p50", `${num(quantile(durations, 0.5), 2)} ms`, "p50_ms"],
          ["p99", `${num(quantile(durations, 0.99), 2)} ms`, "p99_ms"],
          ["bound", `${bound} pods in ${age(span)}`, "bound"],
          ["throughput", span > 0 ? `${num(bound / span)} pods/s` : "–", "throughput"],
          ["pending tasks", last ? last.pending_tasks : "–", "pending_tasks"],
        ]),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", { text: "Conf" }),
        kv([
          ["source", conf.source || "built in", "conf.source"],
          ["loaded", when(conf.loaded_at), "conf.loaded_at"],
          [
            "last reload",
            rel ? h("span", { class: rel.result === "ok" ? "ok" : "bad", text: rel.result }) : "–",
            "conf.last_reload",
          ],
          rel && rel.message ? ["message", rel.message, "conf.last_reload.message"] : null,
          rel && rel.at ? ["at", when(rel.at)] : null,
        ]),
      ),
    );
    $("scheduler-body").replaceChildren(
      cards,
      h("div", { class: "card wide chart" }, h("h2", { text: "Cycle latency and throughput" }), h("div", { class: "chartwrap" }, canvas)),
      h("div", { class: "card wide" }, h("h2", { text: "Conf in force" }), h("pre", { id: "conf-text", text: conf.text || "" })),
    );
    drawCycles(canvas, cycles);
  }

  // -- routing and refresh ------------------------------------------------------------------------
  const RENDER = { queues: renderQueues, jobs: renderJobs, job: renderJob, nodes: renderNodes, scheduler: renderScheduler };

  function route() {
    const hash = decodeURIComponent(location.hash.replace(/^#/, ""));
    const m = /^(job|pod)\/([^/]+)\/(.+)$/.exec(location.hash.replace(/^#/, ""));
    if (m) {
      state.view = "job";
      state.jobKind = m[1];
      state.job = [decodeURIComponent(m[2]), decodeURIComponent(m[3])];
    } else {
      state.view = RENDER[hash] ? hash : "queues";
    }
    for (const sec of document.querySelectorAll("section.view")) sec.hidden = sec.id !== `view-${state.view}`;
    for (const a of document.querySelectorAll("#nav a")) {
      a.classList.toggle("active", a.dataset.view === state.view || (state.view === "job" && a.dataset.view === "jobs"));
    }
    document.body.dataset.view = state.view;
    refresh();
  }

  async function refresh() {
    clearTimeout(state.timer);
    if (state.inflight) state.inflight.abort();
    const ctl = new AbortController();
    state.inflight = ctl;
    const view = state.view;
    const sec = $(`view-${view}`);
    sec.setAttribute("aria-busy", "true");
    try {
      await RENDER[view](ctl.signal);
      showError(null);
      sec.dataset.loaded = String((parseInt(sec.dataset.loaded || "0", 10) || 0) + 1);
    } catch (e) {
      if (e.name === "AbortError") return;
      showError(e);
    } finally {
      if (state.inflight === ctl) {
        state.inflight = null;
        sec.removeAttribute("aria-busy");
        state.timer = setTimeout(tick, REFRESH_MS);
      }
    }
  }

  function tick() {
    if (document.hidden) {
      state.timer = setTimeout(tick, REFRESH_MS);
      return;
    }
    refresh();
  }

  function bindControls() {
    const j = state.jobs;
    $("jobs-state").addEventListener("change", (e) => {
      j.state = e.target.value;
      j.offset = 0;
      refresh();
    });
    $("jobs-queue").addEventListener("change", (e) => {
      j.queue = e.target.value;
      j.offset = 0;
      refresh();
    });
    $("jobs-limit").addEventListener("change", (e) => {
      j.limit = parseInt(e.target.value, 10) || 50;
      j.offset = 0;
      refresh();
    });
    $("jobs-prev").addEventListener("click", () => {
      j.offset = Math.max(0, j.offset - j.limit);
      refresh();
    });
    $("jobs-next").addEventListener("click", () => {
      j.offset += j.limit;
      refresh();
    });
    $("nodes-tier").addEventListener("change", (e) => {
      state.nodes.tier = e.target.value;
      refresh();
    });
    $("nodes-metric").addEventListener("change", (e) => {
      state.nodes.metric = e.target.value;
      redrawHeat();
    });
    let resizeTimer = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (state.view === "nodes") paintNodes();
        else if (state.view === "scheduler") refresh();
      }, 150);
    });
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) refresh();
    });
    const initial = params.get("state");
    if (initial && ["pending", "running", "all"].includes(initial)) {
      j.state = initial;
      $("jobs-state").value = initial;
    }
  }

  window.addEventListener("hashchange", route);
  document.addEventListener("DOMContentLoaded", () => {
    bindControls();
    route();
  });
})();
