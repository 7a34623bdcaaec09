// The entry point of the console's vendored @ag-ui/client bundle
// (gateway/console/static/vendor/agui-client.js, built by scripts/build-console).
export { AbstractAgent, HttpAgent } from "@ag-ui/client";
export { Observable } from "rxjs";
