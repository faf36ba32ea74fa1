// gilty HTML report: the DOM helpers every part of the page uses (inlined first). Nodes are built with
// createElement/textContent only: names, paths and source come from the profiled program and are never
// parsed as HTML.
"use strict";
const GILTY_DOM = (function () {
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent, tag, attrs, text) { const n = el(tag, attrs, text); parent.appendChild(n); return n; }
  return { el, add };
})();
