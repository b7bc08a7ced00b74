#!/usr/bin/env bash
# Checks that a manual page (docs/man/*.1) covers what the program's --help
# lists: every long option (of the program and of each subcommand), every
# subcommand and every value of a positional's {a,b,...} list (umemcg-bench's
# scenarios). A new option or command without its manual entry fails here.
#
# usage: man_pages_test.sh MANPAGE PROGRAM
set -euo pipefail
page=$1 program=$2
# The page's text with roff's escaped hyphens ("\-") as plain ones.
text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "${page}")
missing=()

need() {  # need WORD WHERE
  grep -qF -- "$1" <<<"${text}" || missing+=("$1 (from $2)")
}
# need_entry NAME WHERE: NAME set in bold (.B, .BI, .BR) as a whole word,
# as a command or scenario entry of the page is.
need_entry() {
  grep -qE -- "^\.B[IR]? (.* )?\"?$1\b" <<<"${text}" || missing+=("$1 (from $2)")
}
# need_options HELP_TEXT WHERE
need_options() {
  local opt
  for opt in $(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$1" | sort -u); do
    need "${opt}" "$2"
  done
}

help=$("${program}" --help)
need_options "${help}" "$(basename "${program}") --help"
# Subcommands: the "Subcommands:" section, one per line.
subcommands=$(sed -n '/^Subcommands:/,/^$/p' <<<"${help}" | awk 'NR > 1 && NF {print $1}')
for sub in ${subcommands}; do
  need_entry "${sub}" "Subcommands"
  need_options "$("${program}" "${sub}" --help)" "$(basename "${program}") ${sub} --help"
done
# Positional choices, e.g. "scenario TEXT:{sendfile,kmem,...}".
for list in $(grep -oE '^ +[a-zA-Z_]+ [A-Z]+:\{[^}]*\}' <<<"${help}" | sed 's/.*{\(.*\)}/\1/'); do
  for value in ${list//,/ }; do
    need_entry "${value}" "a positional's choices"
  done
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "${page} lacks what $(basename "${program}") --help lists:"
  printf '  %s\n' "${missing[@]}"
  exit 1
fi
echo "${page}: covers every option, command and choice of --help"
