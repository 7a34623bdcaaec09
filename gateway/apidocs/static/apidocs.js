// The page at /docs: renders the gateway's /openapi.json (OpenAPI 3.1) as a list of operations
// and their schemas. Everything is built as DOM nodes from text, never as HTML: descriptions
// come from adapters, plug-ins included.

const METHODS = ["get", "post", "put", "patch", "delete"];
// The document's component schemas, once loaded: a request body's fields are shown in place.
let components = {};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// `code` spans of a description as <code>, the rest as text; blank lines part paragraphs.
// Docstrings (reST) quote code in double backticks: the same span.
function prose(text, tag = "p") {
  if (!text) return null;
  return String(text)
    .replaceAll("``", "`")
    .split(/\n\s*\n/)
    .map((para) =>
      el(
        tag,
        {},
        para
          .replace(/\s*\n\s*/g, " ")
          .split("`")
          .map((part, i) => (i % 2 ? el("code", {}, part) : part)),
      ),
    );
}

function refName(ref) {
  return ref.startsWith("#/components/schemas/") ? ref.slice("#/components/schemas/".length) : ref;
}

// A schema as a short type expression: links for components, `a | b` for unions.
function typeOf(schema) {
  if (!schema || typeof schema !== "object") return "any";
  if (schema.$ref) {
    const name = refName(schema.$ref);
    return el("a", { href: `#schema-${name}` }, name);
  }
  const union = schema.anyOf || schema.oneOf;
  if (union) return joined(union.map(typeOf), " | ");
  if (schema.enum) return joined(schema.enum.map((v) => JSON.stringify(v)), " | ");
  if ("const" in schema) return JSON.stringify(schema.const);
  if (schema.type === "array") return el("span", {}, "array of ", typeOf(schema.items));
  if (schema.contentSchema) {
    return el("span", {}, `${schema.contentMediaType || "string"}: `, typeOf(schema.contentSchema));
  }
  if (Array.isArray(schema.type)) return schema.type.join(" | ");
  return schema.type || "any";
}

function joined(parts, separator) {
  return parts.flatMap((part, i) => (i ? [separator, part] : [part]));
}

function constraints(schema) {
  const notes = [];
  if (schema.default !== undefined) notes.push(`default ${JSON.stringify(schema.default)}`);
  if (schema.minimum !== undefined) notes.push(`≥ ${schema.minimum}`);
  if (schema.maximum !== undefined) notes.push(`≤ ${schema.maximum}`);
  if (schema.pattern) notes.push(`pattern ${schema.pattern}`);
  return notes.length ? el("span", { class: "summary" }, ` (${notes.join(", ")})`) : null;
}

function propertiesTable(schema) {
  const properties = Object.entries(schema.properties || {});
  if (!properties.length) return null;
  const required = new Set(schema.required || []);
  return el(
    "table",
    {},
    el("tr", {}, el("th", {}, "field"), el("th", {}, "type"), el("th", {}, "")),
    properties.map(([name, prop]) =>
      el(
        "tr",
        {},
        el("td", {}, el("code", {}, name), required.has(name) ? el("span", { class: "required" }, " required") : null),
        el("td", { class: "type" }, typeOf(prop), constraints(prop)),
        el("td", {}, prose(prop.description, "span")),
      ),
    ),
  );
}

function mediaBlock(mediaType, media, { fields = false } = {}) {
  const parts = [el("div", {}, el("span", { class: "media" }, mediaType), " ", typeOf(media.schema))];
  if (fields && media.schema?.$ref) parts.push(propertiesTable(components[refName(media.schema.$ref)] || {}));
  if (media["x-itemSchema"]) {
    const item = media["x-itemSchema"];
    parts.push(el("div", {}, "each item: ", typeOf(item)), propertiesTable(item));
  }
  if (media.example !== undefined) {
    const example = typeof media.example === "string" ? media.example : JSON.stringify(media.example, null, 2);
    parts.push(el("pre", {}, example));
  }
  return el("div", {}, parts);
}

function parametersTable(parameters) {
  if (!parameters?.length) return null;
  return [
    el("h3", {}, "Parameters"),
    el(
      "table",
      {},
      el("tr", {}, el("th", {}, "name"), el("th", {}, "in"), el("th", {}, "type"), el("th", {}, "")),
      parameters.map((p) =>
        el(
          "tr",
          {},
          el("td", {}, el("code", {}, p.name), p.required ? el("span", { class: "required" }, " required") : null),
          el("td", {}, p.in),
          el("td", { class: "type" }, typeOf(p.schema), constraints(p.schema || {})),
          el("td", {}, prose(p.description, "span")),
        ),
      ),
    ),
  ];
}

function requestBody(body) {
  if (!body) return null;
  return [
    el("h3", {}, body.required ? "Request body" : "Request body (optional)"),
    prose(body.description),
    Object.entries(body.content || {}).map(([type, media]) => mediaBlock(type, media, { fields: true })),
  ];
}

// What the client sends on an operation that upgrades to a WebSocket (no OpenAPI version has a
// place for WebSocket messages; the gateway puts it under `x-websocket`).
function websocketFrames(websocket) {
  if (!websocket?.clientFrame) return null;
  const frame = websocket.clientFrame;
  return [
    el("h3", {}, "WebSocket frames you send"),
    el("div", {}, el("span", { class: "media" }, "text frame"), " ", typeOf(frame)),
    propertiesTable(frame.$ref ? components[refName(frame.$ref)] || {} : frame),
  ];
}

function responsesTable(responses) {
  return [
    el("h3", {}, "Responses"),
    el(
      "table",
      {},
      Object.entries(responses || {}).map(([status, response]) =>
        el(
          "tr",
          {},
          el("td", { class: "status" }, status),
          el(
            "td",
            {},
            prose(response.description, "div"),
            Object.entries(response.content || {}).map(([type, media]) => mediaBlock(type, media)),
          ),
        ),
      ),
    ),
  ];
}

function operation(doc, path, method, op) {
  const security = op.security ?? doc.security ?? [];
  const id = op.operationId || `${method}-${path}`;
  return el(
    "details",
    { class: "op", id: `op-${id}`, "data-operation": `${method.toUpperCase()} ${path}` },
    el(
      "summary",
      {},
      el("span", { class: `method ${method}` }, method),
      el("span", { class: "path" }, path),
      el("span", { class: "summary" }, op.summary || ""),
      security.length ? el("span", { class: "lock" }, "needs the token") : null,
    ),
    el(
      "div",
      { class: "op-body" },
      prose(op.description),
      parametersTable(op.parameters),
      requestBody(op.requestBody),
      websocketFrames(op["x-websocket"]),
      responsesTable(op.responses),
    ),
  );
}

function operationsByTag(doc) {
  const groups = new Map((doc.tags || []).map((tag) => [tag.name, { tag, ops: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const name = op.tags?.[0] || "Other";
      if (!groups.has(name)) groups.set(name, { tag: { name }, ops: [] });
      groups.get(name).ops.push(operation(doc, path, method, op));
    }
  }
  return [...groups.values()]
    .filter((group) => group.ops.length)
    .map(({ tag, ops }) => el("section", { class: "tag" }, el("h2", {}, tag.name), prose(tag.description), ops));
}

function schemaSection(name, schema) {
  return el(
    "div",
    { class: "schema", id: `schema-${name}` },
    el("h3", {}, name),
    prose(schema.description),
    propertiesTable(schema) || el("div", { class: "type" }, typeOf(schema)),
  );
}

function render(doc) {
  components = doc.components?.schemas || {};
  document.title = `${doc.info?.title || "API"} API`;
  document.getElementById("title").textContent = `${doc.info?.title || "API"} API`;
  document.getElementById("version").textContent = `${doc.info?.version || ""} · OpenAPI ${doc.openapi}`;
  const intro = document.getElementById("intro");
  intro.append(...(prose(doc.info?.description) || []));
  const schemes = doc.components?.securitySchemes || {};
  if (Object.keys(schemes).length) {
    intro.append(
      el("h3", {}, "Authentication"),
      ...Object.entries(schemes).map(([name, scheme]) => el("p", {}, el("code", {}, name), ": ", prose(scheme.description, "span"))),
    );
  }
  document.getElementById("operations").append(...operationsByTag(doc));
  const schemas = Object.entries(doc.components?.schemas || {}).sort(([a], [b]) => a.localeCompare(b));
  document.getElementById("schema-list").append(...schemas.map(([name, schema]) => schemaSection(name, schema)));
  document.getElementById("schemas").hidden = !schemas.length;
  // A link to #op-… or #schema-… opens what it points at.
  const target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
  if (target instanceof HTMLDetailsElement) target.open = true;
  target?.scrollIntoView();
}

async function main() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("/openapi.json", { headers: { accept: "application/json" } });
    if (!response.ok) throw new Error(`/openapi.json answered ${response.status}`);
    render(await response.json());
    status.textContent = "";
    status.hidden = true;
    document.body.dataset.loaded = "true";
    document.body.dataset.loadedMs = String(Math.round(performance.now()));
  } catch (error) {
    status.textContent = `Could not load the description: ${error.message}`;
    status.classList.add("failed");
  }
}

main();
