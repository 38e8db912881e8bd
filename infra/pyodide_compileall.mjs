// Bytecode for the Lambda interpreter without that interpreter installed: Pyodide's CPython (npm
// `pyodide`, WebAssembly) on Node.js compiles a directory of this machine, as `infra/packaging.py`'s
// native compileall does (same arguments, same mode).
//   node infra/pyodide_compileall.mjs PYODIDE_PACKAGE_DIR --version
//   node infra/pyodide_compileall.mjs PYODIDE_PACKAGE_DIR DIRECTORY DESTDIR
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, ...rest] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(packageDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ indexURL: packageDir + path.sep, stdout: () => {}, stderr: (line) => console.error(line) });
if (rest[0] === "--version") {
  console.log(pyodide.runPython("import sys; '%d.%d %s' % (*sys.version_info[:2], sys.version.split()[0])"));
} else {
  const [directory, destdir] = rest;
  pyodide.FS.mkdir("/asset");
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: path.resolve(directory) }, "/asset");
  pyodide.globals.set("destdir", destdir);
  const ok = pyodide.runPython(`
import compileall, py_compile
compileall.compile_dir("/asset", ddir=destdir, quiet=2, workers=1,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
`);
  process.exit(ok ? 0 : 1);
}
