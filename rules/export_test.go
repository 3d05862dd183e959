package rules

// KindOf is kindOf, for the tests of package rules_test.
var KindOf = kindOf
