// The coach's live page: one WebSocket for the data, one POST per button; plain canvas plots.
// Rows (controller/webview.py status_sample): [t s, commanded deg, measured deg, commanded
// torque N·m, measured torque N·m, repetition, state, fault, host misses, late sends].
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const T = 0, CMD = 1, MEAS = 2, TAU_CMD = 3, TAU_MEAS = 4, REP = 5, STATE = 6, FAULT = 7;
  const view = { hello: null, rows: [], live: false, final: false, cursor: -1, dirty: true };
  let socket = null;

  function fmt(value, digits) {
    return value === null || value === undefined || Number.isNaN(value) ? "—" : value.toFixed(digits);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws?token=${encodeURIComponent(token)}`);
    socket.onopen = () => setLink("connected", false);
    socket.onmessage = (event) => receive(JSON.parse(event.data));
    socket.onclose = () => {
      if (view.final) { setLink("session over: the server has closed; this page keeps its summary", false); return; }
      setLink("connection lost — retrying", true);
      setTimeout(connect, 1000);
    };
  }

  function setLink(text, lost) {
    const link = $("link");
    link.textContent = text;
    link.className = lost ? "link lost" : "link";
  }

  function receive(message) {
    if (message.type === "hello") {
      view.hello = message; view.rows = []; view.live = true; view.final = false;
      $("replay").hidden = true;
    } else if (message.type === "sample") {
      const rows = view.rows, row = message.row, last = rows[rows.length - 1];
      if (!last || last[T] !== row[T] || last[STATE] !== row[STATE] || last[MEAS] !== row[MEAS]) rows.push(row);
    } else if (message.type === "session") {
      view.hello = message; view.rows = message.rows; view.live = false; view.final = true;
      const slider = $("slider");
      slider.max = String(Math.max(view.rows.length - 1, 0));
      slider.value = slider.max;
      view.cursor = view.rows.length - 1;
      $("summary").textContent = message.summary.lines.join("\n");
      $("replay-note").textContent = "— drag the slider to move through the session";
      $("replay").hidden = false;
      if (socket && socket.readyState === WebSocket.OPEN) socket.send("ack-session");
    }
    view.dirty = true;
  }

  function currentRow() {
    const rows = view.rows;
    if (!rows.length) return null;
    return view.live ? rows[rows.length - 1] : rows[Math.min(Math.max(view.cursor, 0), rows.length - 1)];
  }

  function planAt(key, t) {  // the plan's value at stream time t (previous sample)
    const plan = view.hello.plan, times = plan.t, values = plan[key];
    if (!values || !times.length) return null;
    let lo = 0, hi = times.length - 1;
    if (t <= times[0]) return values[0];
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (times[mid] <= t) lo = mid; else hi = mid - 1; }
    return values[lo];
  }

  function updateText(row) {
    const hello = view.hello, meta = hello ? hello.meta : null;
    if (meta) {
      $("gesture").textContent = meta.gesture || "—";
      $("mode").textContent = meta.mode;
      $("load").textContent = meta.mode === "assistive" || meta.mode === "resistive" ? `${meta.load_pct} %` : "—";
      $("speed").textContent = String(meta.speed);
    }
    const buttons = view.live && row && row[STATE] !== "DISARMED" && row[STATE] !== "FAULT";
    $("stop").disabled = !buttons; $("estop").disabled = !buttons;
    if (!row) return;
    let state = row[STATE];
    const badge = $("state");
    badge.textContent = state === "FAULT" ? `FAULT ${row[FAULT]}` : state;
    badge.className = `state ${state}`;
    $("rep").textContent = row[REP] === 0 ? "rest / ramp" : meta ? `${row[REP]} of ${meta.reps}` : String(row[REP]);
    $("time").textContent = `${fmt(row[T], 2)} s`;
    $("cmd").textContent = fmt(row[CMD], 1);
    $("meas").textContent = fmt(row[MEAS], 1);
    $("err").textContent = row[CMD] === null || row[MEAS] === null ? "—" : fmt(row[MEAS] - row[CMD], 2);
    const limits = hello.limits;
    const athlete = planAt("athlete_nm", row[T]);
    bars([
      ["athlete (her share)", athlete, limits.athlete_nm, "athlete"],
      ["bench commanded", row[TAU_CMD], limits.bench_nm, ""],
      ["bench measured", row[TAU_MEAS], limits.bench_nm, ""],
    ]);
  }

  function bars(items) {
    const box = $("bars");
    if (box.children.length !== items.length) {
      box.textContent = "";
      for (const [name] of items) {
        const bar = document.createElement("div");
        bar.className = "bar";
        bar.innerHTML = `<span></span><div class="track"><div class="fill"></div></div><span class="value"></span>`;
        bar.firstChild.textContent = name;
        box.appendChild(bar);
      }
    }
    items.forEach(([, value, limit, kind], i) => {
      const bar = box.children[i], fill = bar.querySelector(".fill");
      const ratio = value === null || !limit ? 0 : Math.min(Math.abs(value) / limit, 1);
      fill.style.width = `${(ratio * 100).toFixed(1)}%`;
      fill.className = `fill ${kind}${ratio > 0.9 ? " high" : ""}`;
      bar.querySelector(".value").textContent = `${fmt(value, 1)} / ${fmt(limit, 0)}`;
    });
  }

  function setupCanvas(canvas) {
    const ratio = window.devicePixelRatio || 1, width = canvas.clientWidth, height = canvas.clientHeight;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio); canvas.height = Math.round(height * ratio);
    }
    const context = canvas.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    return { context, width, height };
  }

  function plot(canvas, series, yRange, hLines, cursorT) {
    const { context, width, height } = setupCanvas(canvas);
    const plan = view.hello.plan, left = 40, right = 8, top = 6, bottom = 18;
    let tMax = plan.t.length ? plan.t[plan.t.length - 1] : 1;
    const rows = view.rows;
    if (rows.length) tMax = Math.max(tMax, rows[rows.length - 1][T]);
    const [yMin, yMax] = yRange;
    const x = (t) => left + (t / (tMax || 1)) * (width - left - right);
    const y = (v) => top + (1 - (v - yMin) / (yMax - yMin || 1)) * (height - top - bottom);
    context.font = "11px system-ui, sans-serif"; context.fillStyle = "#5b6470"; context.strokeStyle = "#e6e9ed"; context.lineWidth = 1;
    const rough = (yMax - yMin) / 4, power = 10 ** Math.floor(Math.log10(rough || 1));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) || power * 10;
    for (let v = Math.ceil(yMin / step) * step; v <= yMax; v += step) {
      context.beginPath(); context.moveTo(left, y(v)); context.lineTo(width - right, y(v)); context.stroke();
      context.fillText(v.toFixed(0), 2, y(v) + 4);
    }
    for (let s = 0; s <= tMax; s += tMax > 12 ? 5 : 1) context.fillText(`${s}s`, x(s) - 6, height - 4);
    for (const [value, color] of hLines) {
      context.strokeStyle = color; context.setLineDash([5, 4]);
      context.beginPath(); context.moveTo(left, y(value)); context.lineTo(width - right, y(value)); context.stroke();
    }
    context.setLineDash([]);
    for (const [times, values, color, widthPx] of series) {
      context.strokeStyle = color; context.lineWidth = widthPx; context.beginPath();
      let drawing = false;
      for (let i = 0; i < times.length; i++) {
        const v = values[i];
        if (v === null || v === undefined) { drawing = false; continue; }
        if (drawing) context.lineTo(x(times[i]), y(v)); else context.moveTo(x(times[i]), y(v));
        drawing = true;
      }
      context.stroke();
    }
    if (cursorT !== null) {
      context.strokeStyle = "#37474f"; context.lineWidth = 1;
      context.beginPath(); context.moveTo(x(cursorT), top); context.lineTo(x(cursorT), height - bottom); context.stroke();
    }
  }

  function column(index, upTo) {
    const rows = view.rows, end = upTo === undefined ? rows.length : upTo + 1, out = new Array(end);
    for (let i = 0; i < end; i++) out[i] = rows[i][index];
    return out;
  }

  function draw() {
    if (view.dirty && view.hello) {
      view.dirty = false;
      const row = currentRow(), plan = view.hello.plan, limits = view.hello.limits;
      updateText(row);
      const upTo = view.live ? undefined : Math.max(view.cursor, 0);
      const times = view.rows.length ? column(T, upTo) : [];
      const cursorT = row ? row[T] : null;
      const angles = plan.angle.concat(limits.range_deg);
      plot($("angle"), [
        [plan.t, plan.angle, "#b0b8c1", 5],
        [times, view.rows.length ? column(CMD, upTo) : [], "#1565c0", 1.5],
        [times, view.rows.length ? column(MEAS, upTo) : [], "#ef6c00", 1.5],
      ], [Math.min(...angles) - 5, Math.max(...angles) + 5],
      [[limits.range_deg[0], "#2e7d32"], [limits.range_deg[1], "#2e7d32"]], cursorT);
      const bound = Math.max(limits.bench_nm, limits.athlete_nm) * 1.05 || 1;
      const torqueSeries = [[plan.t, plan.bench_nm, "#90caf9", 4]];
      if (plan.athlete_nm) torqueSeries.push([plan.t, plan.athlete_nm, "#a5d6a7", 4]);
      torqueSeries.push([times, view.rows.length ? column(TAU_MEAS, upTo) : [], "#ef6c00", 1.5]);
      plot($("torque"), torqueSeries, [-bound, bound],
        [[limits.bench_nm, "#1565c0"], [-limits.bench_nm, "#1565c0"],
         [limits.athlete_nm, "#2e7d32"], [-limits.athlete_nm, "#2e7d32"]], cursorT);
    }
    requestAnimationFrame(draw);
  }

  async function press(kind) {
    const result = $("stop-result");
    result.textContent = `${kind === "estop" ? "E-STOP" : "STOP"} sent…`;
    try {
      const response = await fetch("/api/stop", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Bemore-Token": token },
        body: JSON.stringify({ kind }),
      });
      const body = await response.json();
      result.textContent = response.ok ? `${kind === "estop" ? "E-STOP" : "STOP"} received by the bench PC` : `refused: ${body.error}`;
    } catch (error) {
      result.textContent = `not sent: ${error}`;
    }
  }

  $("stop").addEventListener("click", () => press("stop"));
  $("estop").addEventListener("click", () => press("estop"));
  $("slider").addEventListener("input", (event) => { view.cursor = Number(event.target.value); view.dirty = true; });
  window.addEventListener("resize", () => { view.dirty = true; });
  connect();
  requestAnimationFrame(draw);
})();
