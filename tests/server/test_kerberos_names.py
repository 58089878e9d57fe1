"""Kerberos principals to short names (``sasl.kerberos.principal.to.local.rules``), as Kafka 2.7 maps them.

The vectors of Kafka's own ``KerberosNameTest`` and ``KerberosRuleTest`` come first; the rest pin down what
Kafka's classes do at the edges (checked against them on a JVM): DEFAULT and the default realm, the list
syntax, Java's replacement syntax and empty matches, results holding ``/`` or ``@``, errors found at start
and errors found only when a rule is tried. Last, :func:`default_realm` read from a krb5.conf by libkrb5.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.kerberos_names import (
    PROPERTY,
    KerberosName,
    KerberosNameError,
    NoMatchingRule,
    ShortNamer,
)

REPO = Path(__file__).resolve().parents[2]


def short(rules: list[str] | str, principal: str, realm: str | None = "R") -> str:
    return ShortNamer.from_rules(rules, realm).short_name(principal)


# -- Kafka's KerberosNameTest ------------------------------------------------------------------------

APP_RULES = [r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g", r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g", "DEFAULT"]


@pytest.mark.parametrize("principal, parts, expected", [
    ("App.service-name/example.com@REALM.COM", ("App.service-name", "example.com", "REALM.COM"), "service-name"),
    ("App.service-name@REALM.COM", ("App.service-name", None, "REALM.COM"), "service-name"),
    ("user/host@REALM.COM", ("user", "host", "REALM.COM"), "user"),
])
def test_kafka_parse_vectors(principal, parts, expected):
    name = KerberosName.parse(principal)
    assert (name.service_name, name.host_name, name.realm) == parts
    namer = ShortNamer.from_rules(APP_RULES, "REALM.COM")
    assert namer.short_name(name) == expected
    assert namer.short_name(principal) == expected


CASE_PRINCIPALS = ["User@REALM.COM", "TestABC/host@FOO.COM", "ABC_User_ABC/host@FOO.COM",
                   "App.SERVICE-name/example.com@REALM.COM", "User/root@REALM.COM"]


def case_rules(suffix: str) -> list[str]:
    return [f"RULE:[1:$1]/{suffix}", f"RULE:[2:$1](Test.*)s/ABC///{suffix}", f"RULE:[2:$1](ABC.*)s/ABC/XYZ/g/{suffix}",
            rf"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/{suffix}", f"RULE:[2:$1]/{suffix}", "DEFAULT"]


def test_kafka_lower_case_vectors():
    namer = ShortNamer.from_rules(case_rules("L"), "REALM.COM")
    assert [namer.short_name(p) for p in CASE_PRINCIPALS] == ["user", "test", "xyz_user_xyz", "service-name", "user"]


def test_kafka_upper_case_vectors():
    namer = ShortNamer.from_rules(case_rules("U"), "REALM.COM")
    assert [namer.short_name(p) for p in CASE_PRINCIPALS] == ["USER", "TEST", "XYZ_USER_XYZ", "SERVICE-NAME", "USER"]


@pytest.mark.parametrize("rule", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/g",
    "rule:[1:$1]", "rule:[1:$1]/L/U", "rule:[1:$1]/U/L", "rule:[1:$1]/LU",
    "RULE:[1:$1/L", "RULE:[1:$1]/l", "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
])
def test_kafka_invalid_rule_vectors(rule):
    with pytest.raises(KerberosNameError) as err:
        ShortNamer.from_rules([rule], "REALM.COM")
    assert not isinstance(err.value, NoMatchingRule)
    assert PROPERTY in str(err.value) and repr(rule) in str(err.value)


# -- Kafka's KerberosRuleTest (the format's $n), through whole rules ---------------------------------

@pytest.mark.parametrize("rule, principal, expected", [
    ("RULE:[1:]", "x@R", ""),
    ("RULE:[1:hello]", "x@R", "hello"),
    ("RULE:[2:hello]", "x/y@R", "hello"),
    ("RULE:[1:hello $0]", "x@too", "hello too"),
    ("RULE:[1:hello $0]", "x@no recursion $1", "hello no recursion $1"),  # a parameter is not expanded again
    ("RULE:[2:$2.$1.$0]", "a/b@R", "b.a.R"),
    ("RULE:[1:$01]", "a@R", "a"),  # Integer.parseInt("01")
])
def test_format_parameters(rule, principal, expected):
    assert short([rule], principal) == expected


@pytest.mark.parametrize("rule, principal, complaint", [
    ("RULE:[1:$3]", "x@R", "outside the valid range 0 to 1"),
    ("RULE:[1:hello $a]", "x@R", "bad parameter"),
    ("RULE:[1:hello $]", "x@R", "bad parameter"),
    ("RULE:[1:$99999999999]", "x@R", "bad parameter"),
])
def test_a_bad_format_fails_when_the_rule_is_tried_not_when_read(rule, principal, complaint):
    namer = ShortNamer.from_rules([rule, "DEFAULT"], "R")  # read without complaint, as Kafka
    assert namer.short_name("x/y@R") == "x"  # not tried on two components
    with pytest.raises(KerberosNameError) as err:
        namer.short_name(principal)
    assert not isinstance(err.value, NoMatchingRule)
    assert complaint in str(err.value) and repr(rule) in str(err.value)


# -- principals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, parts", [
    ("alice@EXAMPLE.COM", ("alice", None, "EXAMPLE.COM")),
    ("kafka/broker1.example.com@EXAMPLE.COM", ("kafka", "broker1.example.com", "EXAMPLE.COM")),
    ("alice", ("alice", None, None)),
    ("a/b", ("a/b", None, None)),  # no realm: one bare name, slash and all
    ("a/b/c", ("a/b/c", None, None)),
    ("", ("", None, None)),
    ("@R", ("", None, "R")),
    ("a/@R", ("a", "", "R")),
    ("alice@", ("alice", None, "")),
    ("a\\/b@R", ("a\\", "b", "R")),  # no escapes: the backslash is part of the name
])
def test_parse_and_back(text, parts):
    name = KerberosName.parse(text)
    assert (name.service_name, name.host_name, name.realm) == parts
    assert str(name) == text
    assert KerberosName.parse(str(name)) == name


@pytest.mark.parametrize("text", ["a/b/c@R", "a@b@R", "alice\\@X@R", "a/b@c/d"])
def test_malformed_principals(text):
    with pytest.raises(KerberosNameError, match="malformed Kerberos name") as err:
        KerberosName.parse(text)
    assert repr(text) in str(err.value)
    with pytest.raises(KerberosNameError) as err:
        short(["DEFAULT"], text)
    assert not isinstance(err.value, NoMatchingRule)


def test_a_bare_name_is_its_own_short_name_whatever_the_rules():
    assert short([], "alice") == "alice"
    assert short(["RULE:[1:$1]s/a/b/"], "alice") == "alice"
    assert short([], "a/b") == "a/b"  # not checked for '/' either


# -- DEFAULT and the default realm -------------------------------------------------------------------

def test_default_maps_the_default_realm_to_the_first_component():
    namer = ShortNamer.from_rules("DEFAULT", "EXAMPLE.COM")
    assert namer.short_name("alice@EXAMPLE.COM") == "alice"
    assert namer.short_name("kafka/broker1.example.com@EXAMPLE.COM") == "kafka"
    assert namer.short_name(KerberosName("kafka", "broker1", "EXAMPLE.COM")) == "kafka"


def test_default_does_not_apply_to_another_realm():
    namer = ShortNamer.from_rules("DEFAULT", "EXAMPLE.COM")
    for principal in ("alice@OTHER.COM", "alice@example.com", "kafka/host@OTHER.COM"):
        with pytest.raises(NoMatchingRule) as err:
            namer.short_name(principal)
        assert repr(principal) in str(err.value) and PROPERTY in str(err.value) and "DEFAULT" in str(err.value)
        assert "\n" not in str(err.value)


def test_default_goes_on_to_the_next_rule_in_another_realm():
    namer = ShortNamer.from_rules("DEFAULT, RULE:[1:$1@$0](.*@OTHER[.]COM)s/@.*//", "EXAMPLE.COM")
    assert namer.short_name("alice@EXAMPLE.COM") == "alice"
    assert namer.short_name("bob@OTHER.COM") == "bob"
    with pytest.raises(NoMatchingRule):
        namer.short_name("kafka/host@OTHER.COM")


def test_without_a_default_realm_default_only_takes_an_empty_realm():
    # Kafka uses "" when the JVM finds no default realm
    namer = ShortNamer.from_rules(["DEFAULT"], None)
    assert namer.short_name("alice@") == "alice"
    with pytest.raises(NoMatchingRule):
        namer.short_name("alice@EXAMPLE.COM")


def test_kafka_documentation_example():
    namer = ShortNamer.from_rules("RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//,DEFAULT", "EXAMPLE.COM")
    assert namer.short_name("user@MYDOMAIN.COM") == "user"
    assert namer.short_name("kafka/broker1@EXAMPLE.COM") == "kafka"
    with pytest.raises(NoMatchingRule):
        namer.short_name("kafka/broker1@MYDOMAIN.COM")  # two components: neither rule


def test_the_first_rule_that_applies_wins():
    rules = ["RULE:[2:$1](kafka)s/.*/broker/", "RULE:[1:$1](a.*)", "RULE:[1:$1]/U", "DEFAULT"]
    assert short(rules, "kafka/host@R") == "broker"
    assert short(rules, "zk/host@R") == "zk"
    assert short(rules, "alice@R") == "alice"
    assert short(rules, "bob@R") == "BOB"
    assert short(rules, "bob@OTHER") == "BOB"


def test_no_rules_match_nothing_with_a_realm():
    for rules in ([], "", "  "):
        namer = ShortNamer.from_rules(rules, "R")
        assert namer.rules == ()
        with pytest.raises(NoMatchingRule, match="rules: none"):
            namer.short_name("alice@R")


def test_a_rule_of_another_number_of_components_does_not_apply():
    rules = ["RULE:[2:$1]", "RULE:[0:x]", "RULE:[3:x]"]
    with pytest.raises(NoMatchingRule):
        short(rules, "alice@R")
    assert short(rules, "kafka/h@R") == "kafka"


# -- the list ----------------------------------------------------------------------------------------

def test_the_setting_is_split_at_commas_only():
    namer = ShortNamer.from_rules("  RULE:[1:$1]/L ,\n DEFAULT  ", "R")
    assert namer.rules == ("RULE:[1:$1]/L", "DEFAULT")
    assert namer.short_name("Alice@X") == "alice"
    with pytest.raises(KerberosNameError, match="cannot read ' DEFAULT'"):
        ShortNamer.from_rules("RULE:[1:$1] DEFAULT", "R")  # whitespace does not separate rules
    with pytest.raises(KerberosNameError, match="invalid rule ''"):
        ShortNamer.from_rules("DEFAULT,", "R")  # an empty item is a rule that cannot be read
    with pytest.raises(KerberosNameError, match="invalid rule ''"):
        ShortNamer.from_rules("DEFAULT,,DEFAULT", "R")


def test_the_list_form_takes_the_items_as_they_are():
    assert ShortNamer.from_rules(("RULE:[1:$1]", "DEFAULT"), "R").rules == ("RULE:[1:$1]", "DEFAULT")
    with pytest.raises(KerberosNameError):
        ShortNamer.from_rules([" DEFAULT"], "R")


def test_errors_name_the_property_given():
    prop = "listener.name.sasl_plaintext.sasl.kerberos.principal.to.local.rules"
    with pytest.raises(KerberosNameError) as err:
        ShortNamer.from_rules("DEFAULT,RULE:[1:$1](.*", "R", prop)
    assert str(err.value).startswith(prop + ": ") and "'RULE:[1:$1](.*'" in str(err.value)
    with pytest.raises(NoMatchingRule, match=prop):
        ShortNamer.from_rules("DEFAULT", "R", prop).short_name("a@S")


# -- the rule syntax ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rule, principal, expected", [
    ("RULE:[1:$1]L", "Alice@R", "alice"),  # /L without its slash
    ("RULE:[1:$1]s/A/a/L", "ALICE@R", "alice"),  # ... also after a substitution
    ("RULE:[1:$1]s/A/a//L", "ALICE@R", "alice"),
    ("RULE:[1:$1]s/A/a/g/U", "ALICE@R", "ALICE"),
    ("RULE:[1:$1]s/A/a/gU", "Alice@R", "ALICE"),
    ("RULE:[1:$1]/", "alice@R", "alice"),  # a lone trailing slash
    ("RULE:[1:$1]()", "@R", ""),  # an empty match regex matches only the empty string
    ("RULE:[01:$1]/U", "alice@R", "ALICE"),
    ("RULE:[1:$1]/U", "Straße@R", "STRASSE"),  # Java's upper case: full case mapping
    ("RULE:[1:$1](.*)s/b//", "abab@R", "aab"),
    ("RULE:[1:$1](.*)s/b//g", "abab@R", "aa"),
    ("RULE:[1:$1](a[.]b)", "a.b@R", "a.b"),
])
def test_rule_syntax(rule, principal, expected):
    assert short([rule], principal) == expected


def test_the_match_regex_must_match_the_whole_string():
    assert short(["RULE:[1:$1](al)", "RULE:[1:x$1]"], "alice@R") == "xalice"
    assert short(["RULE:[1:$1](al.*)", "RULE:[1:x$1]"], "alice@R") == "alice"
    assert short(["RULE:[1:$1](a|al|alice)", "RULE:[1:x$1]"], "alice@R") == "alice"


@pytest.mark.parametrize("rule, complaint", [
    ("RULE:[:$1]", "is not a number"),
    ("RULE:[99999999999:$1]", "is not a number"),
    ("RULE:[1:$1](a(b)", "cannot be compiled"),  # the match regex cannot hold ')'
    ("RULE:[1:$1]s/(/x/", "cannot be compiled"),
    ("RULE:[1:$1]s/a/b/c/", "cannot read 'c/'"),  # from and to cannot hold '/'
    # Java-only syntax: Kafka reads it, it is refused here rather than read otherwise
    (r"RULE:[1:$1](\p{Lower}+)", "cannot be compiled"),
    (r"RULE:[1:$1](\Qa.b\E)", "cannot be compiled"),
    ("RULE:[1:$1](.*[a&&b])", "inside a class"),  # Java's class intersection
    ("RULE:[1:$1](.*[a[b]])", "inside a class"),  # Java's class union
    ("RULE:[1:$1]s/(?P<x>a)/b/", "(?P...)"),  # Python-only syntax
    ("RULE:[1:$1](a{)", "does not begin a repetition"),  # Python would read a literal '{'; Java refuses
    ("RULE:[1:$1](a{,2})", "does not begin a repetition"),
])
def test_rules_refused_when_read(rule, complaint):
    with pytest.raises(KerberosNameError) as err:
        ShortNamer.from_rules(["DEFAULT", rule], "R")
    message = str(err.value)
    assert complaint in message and repr(rule) in message and message.startswith(PROPERTY + ": ")
    assert "\n" not in message


def test_a_result_holding_a_slash_or_an_at_is_an_error_not_a_miss():
    # Kafka throws at the first rule that applies: the DEFAULT after it is never tried
    for rule, principal in (("RULE:[2:$1/$2]", "a/b@R"), ("RULE:[1:$1@$0]", "alice@R"),
                            ("RULE:[1:$1]s/i/@/", "alice@R"), ("RULE:[1:$1@$0]/L", "alice@R")):
        with pytest.raises(NoMatchingRule) as err:
            short([rule, "DEFAULT"], principal)
        assert repr(rule) in str(err.value)
    # a rule that does not apply is no error, whatever it would have made
    assert short(["RULE:[1:$1@$0](bob@.*)", "DEFAULT"], "alice@R") == "alice"


# -- Java's replacement syntax and empty matches -----------------------------------------------------

@pytest.mark.parametrize("rule, principal, expected", [
    ("RULE:[1:$1]s/(a)/$1$1/", "abc@R", "aabc"),
    ("RULE:[1:$1]s/a/$0$0/", "ab@R", "aab"),
    ("RULE:[1:$1]s/(a)/$12/", "abc@R", "a2bc"),  # one group: $12 is group 1 then '2'
    ("RULE:[1:$1]s/(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)/$12/", "abcdefghijkl@R", "l"),
    (r"RULE:[1:$1]s/a/\$x/", "abc@R", "$xbc"),
    (r"RULE:[1:$1]s/a/\\/", "ab@R", "\\b"),
    (r"RULE:[1:$1]s/a/\x/", "ab@R", "xb"),
    ("RULE:[1:$1]s/(x)?b/<$1>/", "b@R", "<>"),  # a group that took no part is empty
    ("RULE:[1:$1]s/z/$x/", "abc@R", "abc"),  # a bad replacement is harmless while nothing matches
    ("RULE:[1:$1]s/a*/X/g", "baaac@R", "XbXXcX"),
    ("RULE:[1:$1]s/a*/X/g", "aaa@R", "XX"),
    ("RULE:[1:$1]s/|a/X/g", "a@R", "XaX"),  # Java moves on after an empty match (Python's re.sub: XXX)
    ("RULE:[1:$1]s/a*/X/", "baa@R", "Xbaa"),
    ("RULE:[1:$1]s/^a//g", "aaa@R", "aa"),  # ^ holds only at the start
    (r"RULE:[1:$1]s/\bx//g", "ßx x@R", "ßx "),  # \b sees Unicode letters, as Java's
    (r"RULE:[1:$1]s/\w/_/g", "aß@R", "_ß"),  # \w does not, as Java's
])
def test_substitution_as_java(rule, principal, expected):
    assert short([rule], principal) == expected


@pytest.mark.parametrize("rule, complaint", [
    ("RULE:[1:$1]s/z/$x/", "illegal group reference"),
    ("RULE:[1:$1]s/z/$3/", "no group 3"),
    ("RULE:[1:$1]s/(z)/$2/", "no group 2"),
    ("RULE:[1:$1]s/z/a$/", "group index is missing"),
    ("RULE:[1:$1]s/z/${name}/", "named group"),
    ("RULE:[1:$1]s/z/a\\/", "character to be escaped is missing"),
])
def test_a_bad_replacement_fails_when_its_regex_matches(rule, complaint):
    namer = ShortNamer.from_rules([rule], "R")
    assert namer.short_name("abc@R") == "abc"
    with pytest.raises(KerberosNameError) as err:
        namer.short_name("zz@R")
    assert not isinstance(err.value, NoMatchingRule)
    assert complaint in str(err.value) and repr(rule) in str(err.value)


# -- the local Kerberos configuration ----------------------------------------------------------------

def _libkrb5() -> bool:
    try:
        ctypes.CDLL("libkrb5.so.3")
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _libkrb5(), reason="libkrb5.so.3 is not installed")
def test_default_realm_comes_from_krb5_config(tmp_path):
    # libkrb5 reads KRB5_CONFIG when a context is made: a fresh process with it set
    def realm_with(conf: Path) -> str:
        env = {**os.environ, "KRB5_CONFIG": str(conf), "PYTHONPATH": str(REPO)}
        code = "from broker.kerberos_names import default_realm; print(default_realm())"
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout.strip()

    conf = tmp_path / "krb5.conf"
    conf.write_text("[libdefaults]\n    default_realm = TEST.REALM\n")
    assert realm_with(conf) == "TEST.REALM"
    none = tmp_path / "none.conf"
    none.write_text("[libdefaults]\n    dns_lookup_realm = false\n")
    assert realm_with(none) == "None"
