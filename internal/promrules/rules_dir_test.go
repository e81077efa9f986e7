package promrules_test

// rulesDir is the folder of the shipped rule file and its promtool unit tests, relative to this
// package.
const rulesDir = "../../prometheus"
