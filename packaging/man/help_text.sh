# shellcheck shell=bash
# What a program's --help says, read one way for the man pages (make-manpage) and for the test
# that keeps them true (tests/packaging/check_manpages.sh). Nothing here knows a flag by name:
# the flags and commands come from the live --help text, whichever parser prints it.

# help_flags < TEXT: every flag mentioned (--name, -x), one a line, sorted, without =VALUE.
help_flags() {
  grep -oE '(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z0-9._-]*' |
    sed -E 's/^[^-]+//; s/[.]+$//' | sort -u
}

# help_commands < TEXT: the subcommands a multi-command program lists, one a line, in order. A
# command line is indented 2 to 4 spaces (descriptions wrapped onto the next line are indented
# further), starts with a lower-case word, maybe upper-case arguments ("settle KEY"), then two or
# more spaces. "help" and "version" are left out: they are not commands with flags of their own.
help_commands() {
  grep -E '^ {2,4}[a-z][a-z0-9-]*( [A-Z][A-Z_.]*)*( {2,}|$)' | awk '{print $1}' |
    grep -vxE 'help|version' | awk '!seen[$0]++'
}

# man_text FILE.1.gz: the page's text with roff's escapes for hyphens and fonts removed, so that
# "\fB\-\-db.dsn\fR" reads "--db.dsn".
man_text() {
  zcat -- "$1" | sed -E 's/\\-/-/g; s/\\f[BIRP]//g; s/\\f\(..//g; s/\\&//g; s/\\e/\\/g'
}
