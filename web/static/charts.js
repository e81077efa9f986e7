// ledgerd dashboard charts. Each <div class="plot" data-chart="NAME"> is drawn with uPlot from the
// JSON in <script type="application/json" id="NAME-data">, which the server rendered:
//   {kind: "bars"|"lines", stacked: bool, unit: "usd"|"ratio"|"percent"|"count", tz: "Area/City",
//    step: seconds between points, from, to: the range shown [from, to) in unix seconds (the
//    x-axis; each point covers [x, x + step)), x: [unix seconds], series: [{label, values: [number|null],
//    text: ["$1.23", ...], join: bool (dashed, across gaps: a projection)}]}
// Legend values show the server's own text for each point (money is formatted on the server, from
// exact amounts); the plotted heights are only a picture of them. The tables under each chart carry
// the same figures without JavaScript.
(function () {
	"use strict";

	// Okabe-Ito: told apart by people with the common colour-vision deficiencies.
	var palette = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C7A00", "#444444"];
	var height = function () { return window.matchMedia("(max-width: 40rem)").matches ? 220 : 280; };

	// decimals is how many places a tick step needs to be written exactly: 2.5 needs one, 0.25
	// two, 5 none. Fewer would round the labels ("3%" for 2.5%, "0.3" for 0.25).
	function decimals(incr) {
		if (!(incr > 0)) return 0;
		for (var d = 0; d < 6; d++) {
			var scaled = incr * Math.pow(10, d);
			if (Math.abs(scaled - Math.round(scaled)) < 1e-9 * Math.max(1, scaled)) return d;
		}
		return 6;
	}

	function axisValues(unit) {
		return function (u, splits, axisIdx, space, incr) {
			var d = decimals(incr);
			return splits.map(function (v) {
				if (v == null) return "";
				var fixed = function (places) {
					return v.toLocaleString("en-US", { minimumFractionDigits: places, maximumFractionDigits: places });
				};
				switch (unit) {
				case "usd": return "$" + fixed(d);
				case "percent": return fixed(d) + "%";
				case "ratio": return fixed(Math.max(1, d));
				default: return fixed(d);
				}
			});
		};
	}

	function build(el, spec) {
		var n = spec.x.length;
		var bars = spec.kind === "bars";
		var data = [spec.x];
		var step0 = spec.step || 86400;
		// The x series' legend entry is the point under the cursor, and nothing (not "Time: --")
		// while there is none.
		var when = new Intl.DateTimeFormat("en-GB", step0 >= 86400
			? { timeZone: spec.tz, weekday: "short", day: "numeric", month: "short" }
			: { timeZone: spec.tz, weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
		var series = [{
			value: function (u, v) { return v == null ? "" : when.format(new Date(v * 1e3)); }
		}];
		var acc = new Array(n).fill(0);
		var top = 0; // the largest value drawn, for the value axis
		spec.series.forEach(function (s, i) {
			var vals = s.values.map(function (v) { return v == null ? null : Number(v); });
			if (spec.stacked) {
				acc = acc.map(function (a, j) { return a + (vals[j] || 0); });
				vals = acc.slice();
			}
			vals.forEach(function (v) { if (v != null && v > top) top = v; });
			var color = palette[i % palette.length];
			data.push(vals);
			series.push({
				label: s.label,
				stroke: color,
				fill: bars ? color : undefined,
				width: bars ? 0 : 2,
				spanGaps: !!s.join,
				dash: s.join ? [6, 4] : undefined,
				points: { show: !bars && n < 40, size: 4 },
				paths: bars ? uPlot.paths.bars({ size: [0.75, 48], align: 1 }) : undefined,
				value: function (u, v, si, idx) {
					if (idx == null) return "";
					return s.text ? s.text[idx] : (v == null ? "–" : String(v));
				}
			});
		});
		if (spec.stacked) {
			// Draw the tallest (cumulative) series first, each lower one over it.
			data = [data[0]].concat(data.slice(1).reverse());
			series = [series[0]].concat(series.slice(1).reverse());
		}
		var step = spec.step || 86400;
		// The x-axis is the range asked, never what uPlot would make of the data: with one point
		// (a one-day range by day) its own guess spans years. Bars start at their point.
		var from = spec.from || spec.x[0];
		var to = spec.to || spec.x[n - 1] + step;
		var yMax = top > 0 ? top * 1.1 : 1;
		return {
			opts: {
				width: Math.max(200, el.clientWidth),
				height: height(),
				series: series,
				legend: { live: true },
				cursor: { points: { show: !bars } },
				scales: {
					x: { time: true, auto: false, range: function () { return [from, to]; } },
					y: { auto: false, range: function () { return [0, yMax]; } }
				},
				axes: [{}, { values: axisValues(spec.unit), size: 72, incrs: spec.unit === "count" ? counts : undefined }],
				tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), spec.tz); }
			},
			data: data,
			top: top
		};
	}

	// Tick steps of a count axis: whole numbers only.
	var counts = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];

	var plots = [];

	// For the page tests: the tick labels an axis of this unit writes for these values at this step.
	window.ledgerdCharts = {
		tickLabels: function (unit, values, incr) { return axisValues(unit)(null, values, 1, 0, incr); }
	};

	function drawAll() {
		document.querySelectorAll(".plot[data-chart]").forEach(function (el) {
			var src = document.getElementById(el.dataset.chart + "-data");
			if (!src) return;
			var spec = JSON.parse(src.textContent);
			el.textContent = "";
			if (spec.x.length === 0 || !spec.series || spec.series.length === 0) {
				var p = document.createElement("p");
				p.className = "empty";
				p.textContent = "Nothing to chart in this range.";
				el.appendChild(p);
				el.dataset.drawn = "empty";
				return;
			}
			var c = build(el, spec);
			// Once drawn, the chart says what it drew, for the browser tests: the points, the axes'
			// bounds and the largest value.
			c.opts.hooks = { draw: [function (u) {
				el.dataset.points = String(spec.x.length);
				el.dataset.xMin = String(u.scales.x.min);
				el.dataset.xMax = String(u.scales.x.max);
				el.dataset.yMax = String(u.scales.y.max);
				el.dataset.top = String(c.top);
				el.dataset.drawn = "true";
			}] };
			plots.push({ el: el, plot: new uPlot(c.opts, c.data, el) });
		});
	}

	var pending = false;
	window.addEventListener("resize", function () {
		if (pending) return;
		pending = true;
		window.requestAnimationFrame(function () {
			pending = false;
			plots.forEach(function (p) { p.plot.setSize({ width: Math.max(200, p.el.clientWidth), height: height() }); });
		});
	});

	drawAll();
})();
