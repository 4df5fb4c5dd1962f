// Validates prometheus-operator custom resources (ServiceMonitor, PodMonitor, PrometheusRule,
// ScrapeConfig, ...) with the npm package @kubernetes-models/prometheus-operator, two ways:
//   1. its validators, compiled from the operator's API types with their kubebuilder
//      validations (required fields, types, enums, patterns such as durations): model.validate();
//   2. unknown fields, which those validators let through: each object is type-checked by the
//      TypeScript compiler against the package's interface for its kind (I<Kind>), whose excess
//      property check rejects any field the API does not have, at every depth.
//
// usage: node validate_crds.mjs NODE_PREFIX OBJECTS.json
//   NODE_PREFIX holds node_modules/ with @kubernetes-models/prometheus-operator and typescript.
// Prints one line per object and check; exits 1 when any object fails either.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [prefix, objectsFile] = process.argv.slice(2);
const modules = path.join(prefix, "node_modules");
const pkgDir = path.join(modules, "@kubernetes-models/prometheus-operator");
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
const tsVersion = JSON.parse(
  fs.readFileSync(path.join(modules, "typescript/package.json"), "utf8"),
).version;
const objects = JSON.parse(fs.readFileSync(objectsFile, "utf8"));

function modulePath(obj) {
  const [group, version] = String(obj.apiVersion).split("/");
  if (group !== "monitoring.coreos.com" || !version || !/^[A-Za-z]+$/.test(String(obj.kind))) {
    return null;
  }
  const rel = `monitoring.coreos.com/${version}/${obj.kind}`;
  return fs.existsSync(path.join(pkgDir, `${rel}.js`)) ? rel : null;
}

let failed = 0;
const name = (o) => `${o.kind}/${o.metadata?.name}`;

// 1. The package's validators.
for (const obj of objects) {
  const rel = modulePath(obj);
  if (!rel) {
    failed += 2; // neither check can run
    console.log(`FAIL ${name(obj)}: no model for ${obj.apiVersion} ${obj.kind}`);
    continue;
  }
  const mod = await import(pathToFileURL(path.join(pkgDir, `${rel}.js`)).href);
  try {
    new mod[obj.kind](obj).validate();
    console.log(`ok   ${name(obj)} (${obj.apiVersion}): schema`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name(obj)} (${obj.apiVersion}): schema: ${e.message}`);
  }
}

// 2. Unknown fields: one TypeScript file per object, under the prefix so that the package
// resolves from it.
const dir = fs.mkdtempSync(path.join(prefix, "check-"));
try {
  const files = [];
  objects.forEach((obj, i) => {
    const rel = modulePath(obj);
    if (!rel) return;
    const file = path.join(dir, `o${i}.ts`);
    fs.writeFileSync(
      file,
      `import type { I${obj.kind} } from "@kubernetes-models/prometheus-operator/${rel}";\n` +
        `export const object: I${obj.kind} = ${JSON.stringify(obj, null, 2)};\n`,
    );
    files.push([file, obj]);
  });
  let output = "";
  try {
    execFileSync(
      process.execPath,
      [
        path.join(modules, "typescript/bin/tsc"),
        "--noEmit",
        "--strict",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--skipLibCheck",
        ...files.map(([f]) => f),
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
  } catch (e) {
    output = `${e.stdout ?? ""}${e.stderr ?? ""}`;
    if (!output.trim()) output = String(e);
  }
  for (const [file, obj] of files) {
    const base = path.basename(file);
    const errors = output.split("\n").filter((l) => l.includes(base));
    if (errors.length) {
      failed++;
      console.log(`FAIL ${name(obj)}: fields:\n  ${errors.join("\n  ")}`);
    } else {
      console.log(`ok   ${name(obj)}: no unknown field`);
    }
  }
  const unattributed = output
    .split("\n")
    .filter((l) => l.trim() && !files.some(([f]) => l.includes(path.basename(f))));
  if (unattributed.length) {
    failed++;
    console.log(`FAIL tsc:\n  ${unattributed.join("\n  ")}`);
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(
  `${pkg.name} ${pkg.version} + typescript ${tsVersion}: ` +
    `${objects.length * 2 - failed} of ${objects.length * 2} checks passed (${objects.length} objects)`,
);
process.exit(failed ? 1 : 0);
