/**
 * The /charts page's script (served as /charts/charts.js; the page is ./charts.ts). Plain JS without a build step.
 *
 * The view is a link: market, outcome, timeframe, source (when UDF) and the instant of the book shown live in the
 * query string (/charts?market=516828&outcome=0&timeframe=1h&at=2025-09-16T22:00:00Z), rewritten with
 * history.replaceState as the view changes, and a link opened directly restores that view. The API key never goes
 * into a URL: it stays in this browser's localStorage, so a link opens with it in any tab.
 */
export function chartsScript(): string {
  return SCRIPT;
}

const SCRIPT = `(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var LC = window.LightweightCharts;
  var market = null;
  var state = { candles: [], tfSeconds: 0 };
  window.__chartData = null;
  window.__depth = null;
  window.__udf = null;
  window.__coverage = null;
  // The view drawn (what the link names: not the boxes, which may hold a timeframe typed but not loaded yet), and
  // the instant of the book shown (unix seconds), kept across reloads of the same market.
  var view = { market: null, outcome: '0', timeframe: '', source: 'ohlcv', at: null };
  var KEY_STORE = 'pmlake.apiKey';

  function status(text, err) { var s = $('status'); s.textContent = text || ''; s.className = err ? 'err' : ''; }

  // --- the key: this browser's storage, never a URL (storage may be disabled: the key is then typed each time)
  try { $('key').value = localStorage.getItem(KEY_STORE) || ''; } catch (e) { /* no storage */ }
  $('key').addEventListener('input', function () {
    var k = $('key').value.trim();
    try { if (k) localStorage.setItem(KEY_STORE, k); else localStorage.removeItem(KEY_STORE); } catch (e) { /* no storage */ }
  });

  // --- the view in the URL
  var isoSec = function (t) { return new Date(t * 1000).toISOString().replace('.000Z', 'Z'); };
  function writeLink() {
    if (view.market === null) return;
    var parts = [['market', view.market], ['outcome', view.outcome], ['timeframe', view.timeframe]];
    if (view.source === 'udf') parts.push(['source', 'udf']);
    if (view.at !== null) parts.push(['at', isoSec(view.at)]);
    // ':' may stand in a query: the instant stays readable in the address bar.
    var qs = parts.map(function (p) { return p[0] + '=' + encodeURIComponent(p[1]).replace(/%3A/gi, ':'); }).join('&');
    history.replaceState(null, '', location.pathname + '?' + qs);
  }
  function readLink() {
    var q = new URLSearchParams(location.search);
    var at = q.get('at') ? Date.parse(q.get('at')) : NaN;
    return { market: q.get('market'), outcome: q.get('outcome'), timeframe: q.get('timeframe'), source: q.get('source'), at: isNaN(at) ? null : at / 1000 };
  }

  function api(path, params) {
    var qs = new URLSearchParams();
    Object.keys(params).forEach(function (k) { if (params[k] !== undefined && params[k] !== null && params[k] !== '') qs.set(k, String(params[k])); });
    return fetch(path + '?' + qs.toString(), { headers: { 'X-API-Key': $('key').value.trim() } }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(r.status + ': ' + (typeof body.detail === 'string' ? body.detail : JSON.stringify(body.detail)));
        return body;
      });
    });
  }

  // pmlake's timeframes: a whole number of s, m, h, d or w (the server validates; this only sizes a bucket).
  function tfSeconds(tf) {
    var m = /^(\\d+)([smhdw])$/.exec(tf);
    return m ? Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2]] : 0;
  }
  var sec = function (iso) { return Math.floor(Date.parse(iso) / 1000); };

  var chart = LC.createChart($('chart'), { autoSize: true, layout: { background: { color: '#ffffff' }, textColor: '#1b1f24' }, timeScale: { timeVisible: true, secondsVisible: true } });
  var candles = chart.addSeries(LC.CandlestickSeries, { upColor: '#1a7f37', downColor: '#cf222e', borderVisible: false, wickUpColor: '#1a7f37', wickDownColor: '#cf222e' });
  var marker = LC.createSeriesMarkers(candles, []);
  var volume = chart.addSeries(LC.HistogramSeries, { priceScaleId: 'vol', priceFormat: { type: 'volume' }, lastValueVisible: false, priceLineVisible: false });
  chart.priceScale('vol').applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
  candles.priceScale().applyOptions({ scaleMargins: { top: 0.05, bottom: 0.25 } });
  var bidLine = chart.addSeries(LC.LineSeries, { color: '#1a7f37', lineWidth: 1, lastValueVisible: false, priceLineVisible: false });
  var askLine = chart.addSeries(LC.LineSeries, { color: '#cf222e', lineWidth: 1, lastValueVisible: false, priceLineVisible: false });
  // The library's own series, so a test can read what is drawn (series.data()), not only what was fetched.
  window.__series = { candles: candles, volume: volume, bid: bidLine, ask: askLine };
  window.__chart = chart;

  // The market's tick on the price axis (0.001 → 3 decimals, 0.01 → 2): the UDF symbol's pricescale, 10^decimals
  // of the tick (1000 when the catalogue does not know it). The library's default, 2 decimals, hid a 0.001 market.
  function applyTick(scale) {
    var s = scale > 0 ? scale : 1000;
    var fmt = { type: 'price', precision: Math.round(Math.log10(s)), minMove: 1 / s };
    [candles, bidLine, askLine].forEach(function (x) { x.applyOptions({ priceFormat: fmt }); });
    return fmt;
  }
  var scales = {};
  function tickScale(id) {
    if (!scales[id]) {
      scales[id] = api('/v1/charts/udf/symbols', { symbol: id }).then(function (info) { return info.pricescale; });
      scales[id].catch(function () { delete scales[id]; });
    }
    return scales[id].catch(function () { return null; });
  }

  // --- market search
  var searchTimer = 0;
  $('search').addEventListener('input', function () { clearTimeout(searchTimer); searchTimer = setTimeout(search, 300); });
  function search() {
    var text = $('search').value.trim();
    var box = $('results');
    if (!text) { box.textContent = ''; return; }
    api('/v1/markets', { search: text, limit: 20 }).then(function (rows) {
      box.textContent = '';
      if (rows.length === 0) box.textContent = 'no market matches';
      rows.forEach(function (m) {
        var b = document.createElement('button');
        b.type = 'button';
        b.dataset.id = m.id;
        b.textContent = m.question + '  (#' + m.id + ', ' + m.trade_count + ' trades, ' + m.orderbook_count + ' book rows)';
        b.addEventListener('click', function () { pick(m); });
        box.appendChild(b);
      });
    }).catch(function (e) { status(e.message, true); });
  }

  function pick(m, outcome, at) {
    market = m;
    $('results').textContent = '';
    $('title').textContent = m.question + ' (#' + m.id + ')';
    $('coverage').textContent = m.data_from ? 'data from ' + m.data_from + ' to ' + m.data_to : 'no data in the lake for this market';
    var sel = $('outcome');
    sel.textContent = '';
    (m.outcomes || []).forEach(function (label, i) { var o = document.createElement('option'); o.value = String(i); o.textContent = i + ': ' + label; sel.appendChild(o); });
    if (outcome && /^\\d+$/.test(outcome) && Number(outcome) < sel.options.length) sel.value = String(Number(outcome));
    load(at === undefined ? null : at);
  }
  // A reload of the same market keeps the instant shown.
  $('load').addEventListener('click', function () { if (market) load(view.at); else if (pendingLink) openLink(pendingLink); });
  $('timeframe').addEventListener('keydown', function (e) { if (e.key === 'Enter' && market) load(view.at); });
  $('outcome').addEventListener('change', function () { if (market) load(view.at); });
  $('source').addEventListener('change', function () { if (market) load(view.at); });

  // A link opened directly: its market (with the stored key; else once the key is typed), outcome, timeframe, instant.
  var pendingLink = null;
  function openLink(l) {
    if (!$('key').value.trim()) { pendingLink = l; status('enter your API key to open market #' + l.market); return; }
    pendingLink = null;
    status('loading…');
    api('/v1/markets/' + encodeURIComponent(l.market), {}).then(function (m) { pick(m, l.outcome, l.at); }).catch(function (e) {
      pendingLink = l; // another key, or Load, tries again
      status(e.message, true);
    });
  }
  $('key').addEventListener('change', function () { if (pendingLink) openLink(pendingLink); });

  // --- a UDF datafeed client (the charting library's UDFCompatibleDatafeed, reduced to what the page draws)
  var UDF = '/v1/charts/udf';
  function udfFeed() {
    var feed = { ready: null, symbols: {}, requests: [], config: null };
    window.__udf = { requests: feed.requests, config: null, symbolInfo: null, resolution: null, history: null, bars: [] };
    function get(path, params) {
      feed.requests.push({ path: UDF + path, params: params });
      return api(UDF + path, params);
    }
    feed.onReady = function () {
      if (!feed.ready) {
        feed.ready = get('/config', {}).then(function (c) {
          feed.config = window.__udf.config = c;
          var list = $('resolutions');
          list.textContent = '';
          (c.supported_resolutions || []).forEach(function (r) { var o = document.createElement('option'); o.value = r; list.appendChild(o); });
          return c;
        });
        feed.ready.catch(function () { feed.ready = null; });
      }
      return feed.ready;
    };
    feed.resolveSymbol = function (symbol) {
      return feed.onReady().then(function () {
        if (!feed.symbols[symbol]) {
          feed.symbols[symbol] = get('/symbols', { symbol: symbol });
          feed.symbols[symbol].catch(function () { delete feed.symbols[symbol]; });
        }
        return feed.symbols[symbol];
      });
    };
    // periodParams as the library passes them: from/to in unix seconds, countBack bars wanted ending at to.
    feed.getBars = function (info, resolution, period) {
      function ask(to, hops) {
        var params = { symbol: info.ticker, resolution: resolution, from: period.from, to: to, countback: period.countBack };
        return get('/history', params).then(function (h) {
          if (h.s === 'error') throw new Error('UDF history: ' + h.errmsg);
          if (h.s === 'no_data') return h.nextTime !== undefined && hops < 3 ? ask(h.nextTime, hops + 1) : { history: h, bars: [] };
          var bars = h.t.map(function (t, i) { return { time: t * 1000, open: h.o[i], high: h.h[i], low: h.l[i], close: h.c[i], volume: h.v[i] }; });
          return { history: h, bars: bars };
        });
      }
      return ask(period.to, 0);
    };
    return feed;
  }
  var feed = null;

  // UDF resolution → seconds: N minutes, NS seconds, ND days, NW weeks (the server has the last word).
  function resolutionSeconds(r) {
    var m = /^(\\d*)([SDW]?)$/i.exec(r);
    if (!m || (m[1] === '' && m[2] === '')) return 0;
    return (m[1] === '' ? 1 : Number(m[1])) * { '': 60, S: 1, D: 86400, W: 604800 }[m[2].toUpperCase()];
  }

  // Newest 2000 bars up to now through the datafeed, as /v1/trades/ohlcv rows (oldest first).
  function udfCandles(id, outcome, resolution) {
    if (!feed) feed = udfFeed();
    var symbol = outcome === '0' ? String(id) : id + '.' + outcome;
    return feed.resolveSymbol(symbol).then(function (info) {
      window.__udf.symbolInfo = info;
      window.__udf.resolution = resolution;
      var to = Math.floor(Date.now() / 1000), n = 2000;
      var from = to - n * Math.max(resolutionSeconds(resolution), 1);
      return feed.getBars(info, resolution, { from: from, to: to, countBack: n, firstDataRequest: true });
    }).then(function (got) {
      window.__udf.history = got.history;
      window.__udf.bars = got.bars;
      return got.bars.map(function (b) { return { timestamp: new Date(b.time).toISOString(), open: b.open, high: b.high, low: b.low, close: b.close, volume: b.volume }; });
    });
  }

  function fetchCandles(id, outcome, tf) {
    if ($('source').value === 'udf') return udfCandles(id, outcome, tf);
    // newest first from the API; the chart wants oldest first
    return api('/v1/trades/ohlcv', { market_id: id, outcome: outcome, timeframe: tf, limit: 2000 }).then(function (rows) { return rows.slice().reverse(); });
  }

  // --- candles, volume, top of book; the first book at the instant at (unix seconds) or, when null, the last candle's
  function load(at) {
    var tf = $('timeframe').value.trim();
    var outcome = $('outcome').value || '0';
    var id = market.id;
    status('loading…');
    var udf = $('source').value === 'udf';
    view.at = at; // the link keeps the instant asked for even when no book is shown
    fetchCandles(id, outcome, tf).then(function (bars) {
      // UDF mode has the symbol's pricescale already (no second symbols request); else the market's, once.
      return (udf ? Promise.resolve((window.__udf.symbolInfo || {}).pricescale) : tickScale(id)).then(function (scale) { return { bars: bars, scale: scale }; });
    }).then(function (got) {
      var bars = got.bars;
      var priceFormat = applyTick(got.scale);
      state = { candles: bars, tfSeconds: udf ? resolutionSeconds(tf) : tfSeconds(tf) };
      candles.setData(bars.map(function (b) { return { time: sec(b.timestamp), open: b.open, high: b.high, low: b.low, close: b.close }; }));
      volume.setData(bars.map(function (b) { return { time: sec(b.timestamp), value: b.volume, color: b.close >= b.open ? 'rgba(26,127,55,0.4)' : 'rgba(207,34,46,0.4)' }; }));
      bidLine.setData([]);
      askLine.setData([]);
      marker.setMarkers([]);
      window.__chartData = { market_id: id, outcome: Number(outcome), timeframe: tf, source: udf ? 'udf' : 'ohlcv', candles: bars, top_of_book: [], price_format: priceFormat };
      chart.timeScale().fitContent();
      view.market = id; view.outcome = outcome; view.timeframe = tf; view.source = udf ? 'udf' : 'ohlcv';
      writeLink();
      if (bars.length === 0) { status('no trades for this market and outcome'); tape(id, outcome, null, null); return null; }
      var start = bars[0].timestamp;
      var end = new Date((sec(bars[bars.length - 1].timestamp) + state.tfSeconds) * 1000).toISOString();
      tape(id, outcome, start, end);
      var scrub = $('scrub');
      scrub.min = String(sec(start));
      scrub.max = String(sec(end));
      return topOfBook(id, outcome, start, end).then(function (tob) {
        var line = sampleTop(bars, tob);
        bidLine.setData(line.bid);
        askLine.setData(line.ask);
        window.__chartData.top_of_book = line.rows;
        status(bars.length + ' candles, ' + tob.length + ' top-of-book changes');
        scrub.disabled = tob.length === 0;
        if (tob.length === 0) { $('at').textContent = 'no order-book data in this window'; return null; }
        // The tape's coverage: there is no book before its first change, so the scrub starts there.
        var bookFrom = Math.ceil(Date.parse(tob[0].timestamp) / 1000);
        scrub.min = String(Math.max(sec(start), bookFrom));
        $('coverage').textContent += '; order book from ' + tob[0].timestamp;
        // The instant asked for (no earlier than the book), else the last candle's own time: inside the data, where
        // the window's end (that candle's close) lies past the tape's last message.
        var t = at !== null ? Math.max(at, bookFrom) : Math.max(sec(bars[bars.length - 1].timestamp), Number(scrub.min));
        scrub.value = String(t);
        return depthAt(t);
      });
    }).catch(function (e) { status(e.message, true); });
  }

  // --- the tape's coverage per UTC day of the window (the last 366 days of it at most: the API's bound)
  var tapeSeq = 0;
  function tape(id, outcome, start, end) {
    var mine = ++tapeSeq, box = $('tape'), info = $('tapeinfo');
    box.textContent = '';
    info.textContent = '';
    window.__coverage = null;
    var params = {};
    if (end) {
      var last = new Date(Date.parse(end) - 1);
      params.end = last.toISOString().slice(0, 10);
      var first = new Date(Math.max(Date.parse(start), last.getTime() - 365 * 86400000));
      params.start = first.toISOString().slice(0, 10);
    }
    return api('/v1/markets/' + encodeURIComponent(id) + '/coverage', params).then(function (c) {
      if (mine !== tapeSeq) return;
      var days = c.days.filter(function (d) { return String(d.outcome) === String(outcome); }).map(function (d) { return { date: d.date, status: d.status }; });
      var mineInc = c.incidents.filter(function (i) { return String(i.outcome) === String(outcome); });
      window.__coverage = { market_id: c.market_id, outcome: Number(outcome), start: c.start, end: c.end, days: days, incidents: mineInc.length };
      var counts = {};
      days.forEach(function (d) {
        var cell = document.createElement('span');
        cell.className = d.status;
        cell.title = d.date + ': ' + d.status;
        cell.dataset.date = d.date;
        box.appendChild(cell);
        counts[d.status] = (counts[d.status] || 0) + 1;
      });
      info.textContent = days.length === 0 ? 'tape coverage: none in this window'
        : 'tape coverage ' + days[0].date + ' to ' + days[days.length - 1].date + ': ' +
          ['verified', 'unverified', 'degraded', 'missing'].filter(function (k) { return counts[k]; }).map(function (k) { return counts[k] + ' ' + k; }).join(', ') +
          ' day(s); ' + (c.incidents_truncated ? 'at least ' : '') + mineInc.length + ' incident(s)';
    }).catch(function (e) { if (mine === tapeSeq) info.textContent = 'tape coverage: ' + e.message; });
  }

  // Every change of best bid/ask in the window, a few pages at most (10,000 rows each).
  function topOfBook(id, outcome, start, end) {
    var all = [];
    function page(offset) {
      return api('/v1/orderbook/top_of_book', { market_id: id, outcome: outcome, start: start, end: end, limit: 10000, offset: offset }).then(function (rows) {
        all = all.concat(rows);
        return rows.length === 10000 && offset < 40000 ? page(offset + 10000) : all;
      });
    }
    return page(0);
  }

  // The top of book at each candle's close: the last change before the bucket ends. One point per candle keeps
  // the chart's time scale the candles' (the library spaces points by index, not by time).
  function sampleTop(bars, tob) {
    var out = { bid: [], ask: [], rows: [] };
    var j = 0, last = null;
    bars.forEach(function (b) {
      var t = sec(b.timestamp), close = (t + state.tfSeconds) * 1000;
      while (j < tob.length && Date.parse(tob[j].timestamp) < close) last = tob[j++];
      if (!last) return;
      out.rows.push({ time: b.timestamp, best_bid: last.best_bid, best_ask: last.best_ask });
      if (last.best_bid !== null) out.bid.push({ time: t, value: last.best_bid });
      if (last.best_ask !== null) out.ask.push({ time: t, value: last.best_ask });
    });
    return out;
  }

  // --- depth at a scrubbed instant
  var scrubTimer = 0;
  $('scrub').addEventListener('input', function () {
    $('at').textContent = new Date(Number($('scrub').value) * 1000).toISOString();
    clearTimeout(scrubTimer);
    scrubTimer = setTimeout(function () { depthAt(Number($('scrub').value)); }, 250);
  });
  chart.subscribeClick(function (p) {
    if (!market || p.time === undefined || $('scrub').disabled) return;
    // The book at the candle's own time (its open, the time the axis and the link name), or where the book begins.
    var t = Math.max(Number(p.time), Number($('scrub').min));
    $('scrub').value = String(t);
    depthAt(t);
  });

  var depthSeq = 0;
  var lastBook = null;
  window.addEventListener('resize', function () { if (lastBook) drawDepth(lastBook); });
  function depthAt(t) {
    if (!market) return null;
    var at = new Date(t * 1000).toISOString();
    var mine = ++depthSeq;
    $('at').textContent = at;
    view.at = t;
    writeLink();
    markCandle(t);
    return api('/v1/orderbook/snapshot', { market_id: market.id, outcome: $('outcome').value || '0', at: at, depth: 50 }).then(function (book) {
      if (mine !== depthSeq) return; // a later scrub won
      window.__depth = { at: at, bids: book.bids, asks: book.asks, best_bid: book.best_bid, best_ask: book.best_ask, verified: book.verified };
      lastBook = book;
      drawDepth(book);
      $('depthinfo').textContent = 'bid ' + book.best_bid + ' / ask ' + book.best_ask + ' · ' + book.bid_levels + ' bid levels, ' + book.ask_levels + ' ask levels · ' +
        (book.verified ? 'verified by the venue' : 'not verified');
    }).catch(function (e) { status(e.message, true); });
  }

  // A marker on the candle holding the book's instant (none when it falls between candles).
  function markCandle(t) {
    var hit = null;
    state.candles.forEach(function (b) { var s = sec(b.timestamp); if (s <= t && t < s + Math.max(state.tfSeconds, 1)) hit = s; });
    marker.setMarkers(hit === null ? [] : [{ time: hit, position: 'aboveBar', shape: 'arrowDown', color: '#0969da', text: 'book' }]);
  }

  // Cumulative size against price: bids (best first) stepping left, asks stepping right.
  function drawDepth(book) {
    var c = $('depth'), ratio = window.devicePixelRatio || 1;
    var w = c.clientWidth, h = c.clientHeight;
    c.width = w * ratio; c.height = h * ratio;
    var g = c.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    var cum = function (levels) { var s = 0; return levels.map(function (l) { s += l.size; return { price: l.price, total: s }; }); };
    var bids = cum(book.bids), asks = cum(book.asks);
    var prices = bids.concat(asks).map(function (l) { return l.price; });
    if (prices.length === 0) { g.fillStyle = '#57606a'; g.fillText('empty book', 10, 20); return; }
    var lo = Math.min.apply(null, prices), hi = Math.max.apply(null, prices);
    if (hi === lo) { lo -= 0.01; hi += 0.01; }
    var top = Math.max(bids.length ? bids[bids.length - 1].total : 0, asks.length ? asks[asks.length - 1].total : 0);
    var pad = 24;
    var x = function (p) { return pad + ((p - lo) / (hi - lo)) * (w - 2 * pad); };
    var y = function (v) { return h - pad - (v / top) * (h - 2 * pad); };
    function side(levels, fill, stroke) {
      if (levels.length === 0) return;
      g.beginPath();
      g.moveTo(x(levels[0].price), y(0));
      var prev = 0;
      levels.forEach(function (l) { g.lineTo(x(l.price), y(prev)); g.lineTo(x(l.price), y(l.total)); prev = l.total; });
      g.lineTo(x(levels[levels.length - 1].price), y(0));
      g.closePath();
      g.fillStyle = fill; g.fill(); g.strokeStyle = stroke; g.stroke();
    }
    side(bids, 'rgba(26,127,55,0.25)', '#1a7f37');
    side(asks, 'rgba(207,34,46,0.25)', '#cf222e');
    g.fillStyle = '#57606a';
    g.fillText(lo.toFixed(3), pad, h - 6);
    g.fillText(hi.toFixed(3), w - pad - 30, h - 6);
    g.fillText('cum. size ' + top.toFixed(2), pad, 14);
  }

  // Last: a link opened directly (everything above is defined by now).
  var link = readLink();
  if (link.timeframe) $('timeframe').value = link.timeframe;
  if (link.source === 'udf') $('source').value = 'udf';
  if (link.market) openLink(link);
})();
`;
