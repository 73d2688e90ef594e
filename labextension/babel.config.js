module.exports = require('@jupyterlab/testing/lib/babel-config').default;
