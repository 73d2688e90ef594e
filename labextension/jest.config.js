// Jest for the pure modules of the sidebar (formatting, state, request bodies, the API wrapper),
// on JupyterLab's own jest preset (jsdom with fetch, ts-jest with tsconfig.test.json).
const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

// Times are shown in the browser's time zone; the tests run in one that is not UTC
// (with summer time) so that a UTC slip shows. Workers inherit it from here.
process.env.TZ = 'Europe/Berlin';

const esModules = ['@codemirror', '@jupyter/ydoc', '@jupyterlab/', '@lumino/', 'lib0', 'nanoid', 'y-protocols', 'yjs'].join('|');

module.exports = {
  ...jestJupyterLab(__dirname),
  automock: false,
  reporters: ['default'],
  testRegex: 'src/__tests__/.*\\.spec\\.tsx?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
