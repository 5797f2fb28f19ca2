import { REPLAY_GUIDE } from './replay-guide.js';

/**
 * The /docs page: self-contained HTML (no CDN: the service may run without internet) that fetches
 * /v1/openapi.json and renders every endpoint with its parameters, bounds, body and response fields, plus a
 * small "try it" form for GET endpoints. All text goes through textContent, never innerHTML. Static: the same
 * string for every request; the route (src/http/docs.ts) sets the headers.
 */
export function docsPage(): string {
  return PAGE;
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pmlake API</title>
<link rel="icon" href="data:,">
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #fafbfc; }
  header { background: #1b1f24; color: #fff; padding: 16px 32px; }
  header h1 { margin: 0; font-size: 22px; }
  header p { margin: 4px 0 0; color: #c9d1d9; }
  main { max-width: 1100px; margin: 0 auto; padding: 16px 32px 64px; }
  nav a { margin-right: 12px; }
  h2 { margin-top: 32px; border-bottom: 1px solid #d0d7de; text-transform: capitalize; }
  .op { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; margin: 12px 0; padding: 8px 16px; }
  .op summary { cursor: pointer; font-family: ui-monospace, monospace; }
  .m { display: inline-block; min-width: 56px; font-weight: 700; text-transform: uppercase; }
  .get { color: #0969da; } .post { color: #1a7f37; } .delete { color: #cf222e; }
  .lock { color: #9a6700; font-size: 12px; margin-left: 8px; }
  .sum { font-family: system-ui, sans-serif; color: #57606a; margin-left: 8px; }
  table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
  th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
  th { background: #f6f8fa; }
  code, pre { font-family: ui-monospace, monospace; font-size: 13px; }
  pre { background: #f6f8fa; padding: 8px; overflow: auto; max-height: 400px; }
  .try input { margin: 2px 8px 2px 0; }
  #error { color: #cf222e; }
</style>
</head>
<body>
<header><h1 id="title">pmlake API</h1><p id="desc"></p><p><a href="/charts" style="color:#9ecbff">Charts</a>: candles, top of book and order-book depth of any market</p></header>
<main>
  <p>Machine-readable description: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI <span id="oas"></span>, version <span id="version"></span>).
  Send your key in the <code>X-API-Key</code> header. Errors are JSON <code>{"detail": ...}</code>; invalid parameters answer 422 naming the parameter.
  A list that stopped at its limit while more rows match says so with a <code>Link: &lt;url&gt;; rel="next"</code> header: follow it for the next page.</p>
  <p><label>API key for "try it": <input id="key" size="44" autocomplete="off"></label></p>
  <nav id="nav"></nav>
  <div id="error"></div>
  <div id="ops"></div>
  ${REPLAY_GUIDE}
</main>
<script>
(function () {
  'use strict';
  var el = function (tag, text, cls) { var e = document.createElement(tag); if (text != null) e.textContent = String(text); if (cls) e.className = cls; return e; };
  var doc;
  function resolve(s) {
    var seen = 0;
    while (s && s.$ref && seen++ < 10) s = doc.components.schemas[s.$ref.split('/').pop()] || {};
    return s || {};
  }
  function typeOf(s) {
    s = s || {};
    if (s.$ref) return s.$ref.split('/').pop();
    if (s.anyOf) return s.anyOf.map(typeOf).join(' | ');
    if (s.enum) return s.enum.map(function (x) { return JSON.stringify(x); }).join(' | ');
    var t = Array.isArray(s.type) ? s.type.join(' | ') : (s.type || 'any');
    if (t === 'array' && s.items) return typeOf(s.items) + '[]';
    if (s.format) t += ' (' + s.format + ')';
    return t;
  }
  function bounds(s) {
    var parts = [];
    if (s.minimum != null && s.minimum > -9007199254740991) parts.push('min ' + s.minimum);
    if (s.maximum != null && s.maximum < 9007199254740991) parts.push('max ' + s.maximum);
    if (s.maxLength != null) parts.push('max length ' + s.maxLength);
    if (s.pattern) parts.push('pattern ' + s.pattern);
    return parts.join(', ');
  }
  function fieldTable(schema) {
    var s = resolve(schema);
    if (s.type === 'array' && s.items) s = resolve(s.items);
    var props = s.properties || {};
    var names = Object.keys(props);
    if (!names.length) return el('p', 'Schema: ' + typeOf(schema));
    var t = el('table');
    var h = t.insertRow(); ['field', 'type', 'notes'].forEach(function (x) { h.appendChild(el('th', x)); });
    names.forEach(function (n) {
      var r = t.insertRow(); var p = props[n];
      r.appendChild(el('td')).appendChild(el('code', n));
      r.appendChild(el('td', typeOf(p)));
      r.appendChild(el('td', [p.description, bounds(p), p.default != null ? 'default ' + JSON.stringify(p.default) : ''].filter(Boolean).join('; ')));
    });
    return t;
  }
  function tryIt(path, op) {
    var box = el('div', null, 'try');
    box.appendChild(el('strong', 'Try it: '));
    var inputs = {};
    (op.parameters || []).forEach(function (p) {
      var i = el('input'); i.placeholder = p.name + (p.required ? ' *' : ''); i.name = p.name; inputs[p.name] = [i, p.in];
      box.appendChild(i);
    });
    var btn = el('button', 'Send'); box.appendChild(btn);
    var out = el('pre'); out.hidden = true; box.appendChild(out);
    btn.addEventListener('click', function () {
      var url = path; var qs = new URLSearchParams();
      Object.keys(inputs).forEach(function (n) {
        var v = inputs[n][0].value; if (!v) return;
        if (inputs[n][1] === 'path') url = url.replace('{' + n + '}', encodeURIComponent(v)); else qs.set(n, v);
      });
      var q = qs.toString(); if (q) url += '?' + q;
      var headers = {}; var k = document.getElementById('key').value; if (k) headers['X-API-Key'] = k;
      out.hidden = false; out.textContent = 'GET ' + url + ' …';
      fetch(url, { headers: headers }).then(function (r) {
        return r.text().then(function (body) {
          var text = body; try { text = JSON.stringify(JSON.parse(body), null, 2); } catch (e) { /* not JSON */ }
          out.textContent = 'GET ' + url + '  →  ' + r.status + '\\n' + text;
        });
      }).catch(function (e) { out.textContent = String(e); });
    });
    return box;
  }
  function render() {
    document.getElementById('title').textContent = doc.info.title + ' API';
    document.getElementById('desc').textContent = doc.info.description || '';
    document.getElementById('version').textContent = doc.info.version;
    document.getElementById('oas').textContent = doc.openapi;
    var byTag = {};
    Object.keys(doc.paths).forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (m) {
        var op = doc.paths[path][m]; var tag = (op.tags && op.tags[0]) || 'other';
        (byTag[tag] = byTag[tag] || []).push({ path: path, method: m, op: op });
      });
    });
    var ops = document.getElementById('ops'); var nav = document.getElementById('nav');
    Object.keys(byTag).forEach(function (tag) {
      var a = el('a', tag); a.href = '#tag-' + tag; nav.appendChild(a);
      var h = el('h2', tag); h.id = 'tag-' + tag; ops.appendChild(h);
      byTag[tag].forEach(function (x) {
        var d = el('details', null, 'op'); d.dataset.path = x.path; d.dataset.method = x.method;
        var s = el('summary');
        s.appendChild(el('span', x.method, 'm ' + x.method)); s.appendChild(el('span', x.path, 'path'));
        if (x.op.security) s.appendChild(el('span', 'X-API-Key', 'lock'));
        s.appendChild(el('span', x.op.summary, 'sum'));
        d.appendChild(s);
        var params = x.op.parameters || [];
        if (params.length) {
          d.appendChild(el('h4', 'Parameters'));
          var t = el('table', null, 'params');
          var hr = t.insertRow(); ['name', 'in', 'required', 'type', 'default', 'bounds', 'description'].forEach(function (c) { hr.appendChild(el('th', c)); });
          params.forEach(function (p) {
            var r = t.insertRow(); r.appendChild(el('td')).appendChild(el('code', p.name));
            r.appendChild(el('td', p.in)); r.appendChild(el('td', p.required ? 'yes' : 'no'));
            r.appendChild(el('td', typeOf(p.schema))); r.appendChild(el('td', p.schema && p.schema.default != null ? JSON.stringify(p.schema.default) : ''));
            r.appendChild(el('td', bounds(p.schema || {}))); r.appendChild(el('td', p.description || ''));
          });
          d.appendChild(t);
        }
        if (x.op.requestBody) {
          d.appendChild(el('h4', 'JSON body'));
          d.appendChild(fieldTable(x.op.requestBody.content['application/json'].schema));
        }
        Object.keys(x.op.responses).forEach(function (code) {
          var resp = x.op.responses[code];
          d.appendChild(el('h4', 'Response ' + code + ' — ' + resp.description));
          var c = resp.content && (resp.content['application/json'] || resp.content[Object.keys(resp.content)[0]]);
          if (code[0] === '2' && c) d.appendChild(fieldTable(c.schema));
        });
        if (x.method === 'get') d.appendChild(tryIt(x.path, x.op));
        ops.appendChild(d);
      });
    });
    document.body.dataset.ready = 'true';
  }
  fetch('/v1/openapi.json').then(function (r) { return r.json(); }).then(function (j) { doc = j; render(); })
    .catch(function (e) { document.getElementById('error').textContent = 'Could not load the API description: ' + e; });
})();
</script>
</body>
</html>
`;
