#!/usr/bin/env bash
# lm_data.sh: the language-model comparison's corpora (results/lm.md), built from Debian packages.
#
#   examples/lm_data.sh                      # both corpora into data/lm (about 10 minutes, 2 cores)
#   examples/lm_data.sh --out DIR --code-mb 125 --prose-mb 0 --no-bundle
#   examples/lm_data.sh --from NAME SRC_DIR  # one corpus NAME from every regular file under SRC_DIR (tests)
#
# Two corpora, each a byte stream (the project's tokenisation: one token per byte, vocabulary 256):
#   code   C sources: the *.c and *.h files of Debian's linux-source-6.1 tarball, a deterministic subset of
#          --code-mb MB (default 125; the whole tree is 1.2 GB, which no carry to the GPU machine could hold),
#          files over 256 KB left out (generated register tables and firmware arrays, not code anyone wrote)
#   prose  English technical prose: the kernel's Documentation/ (*.rst, *.txt, translations left out), the
#          Python 3.11 manual (reST sources), Perl's pod manuals, the PostgreSQL 15, Django and Git manuals,
#          the Rust books, Sphinx's manual, the Debian Administrator's Handbook (en-US), the Linux man-pages
#          (roff) and the GCIDE dictionary (Webster 1913 with WordNet glosses, cut into 64 KB pieces at blank
#          lines); HTML reduced to its text. Debian has no large plain English corpus (no Gutenberg, no
#          Wikipedia dump, no RFCs in bookworm), so this is what "prose" means here: about 125 MB in all.
# The unit of the held-out split is the file (a GCIDE piece counts as one): a file is held out when the first
# 8 hex digits of the SHA-1 of its name ("linux/kernel/fork.c", "python3.11-doc/library/os.rst.txt", ...)
# are 0 mod 10, so the split depends on the names alone and never on the machine or the order of listing.
# The code subset is taken in the same hash order until --code-mb is reached.
#
# Output, for NAME in code and prose (the folder is ignored by git: data is never committed):
#   OUT/NAME/train.txt, OUT/NAME/val.txt   the training and the held-out files, each in name order, joined
#                                          (a newline added to a file that lacks a final one)
#   OUT/NAME/all/1_train.txt, 2_val.txt    hard links to the two: the folder to pass as --data to build/train or
#                                          build/train_cuda. Both read a folder's files in name order and hold out
#                                          the last 10% of the bytes; the longer of train.txt and val.txt is cut
#                                          at its end so that train.txt is exactly 9 times val.txt, which makes
#                                          that last 10% exactly the held-out files
#   OUT/NAME/units.tsv                     split, bytes, name of every file used (the manifest)
#   OUT/SOURCES.txt                        the packages and versions, the sizes and the SHA-256 of each output
#   OUT/lm_code.tar.xz, OUT/lm_prose.tar.xz  each corpus's folder and SOURCES.txt (xz -9) for the GPU machine,
#                                          which reaches no package registry: one carry each (results/lm.md)
# Packages are fetched with apt-get download and unpacked into OUT/pkgs with dpkg-deb (nothing is installed
# on the system, no daemon of dictd's starts); apt-get update runs first as root.
# Exit status: 0 done; 1 a tool, a package or a file was missing or a step failed; 2 a bad command line.
set -euo pipefail
out=data/lm; code_mb=125; max_kb=256; prose_mb=0; bundle=1; from_name=""; from_dir=""
kernel=linux-source-6.1
prose_pkgs="python3.11-doc perl-doc postgresql-doc-15 python-django-doc git-doc rust-doc sphinx-doc debian-handbook
            dict-gcide manpages manpages-dev"
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "lm_data: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || { usage >&2; exit 2; }; out=$2; shift 2 ;;
        --code-mb|--prose-mb)
            [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || { echo "lm_data: $1 needs a whole number of MB" >&2; exit 2; }
            if [ "$1" = --code-mb ]; then code_mb=$2; else prose_mb=$2; fi; shift 2 ;;
        --no-bundle) bundle=0; shift ;;
        --from)
            [ $# -ge 3 ] || { echo "lm_data: --from needs NAME and SRC_DIR" >&2; exit 2; }
            [[ "$2" =~ ^[a-z0-9_]+$ ]] || { echo "lm_data: --from NAME must be letters, digits, _" >&2; exit 2; }
            [ -d "$3" ] || { echo "lm_data: --from $3: not a folder" >&2; exit 2; }
            from_name=$2; from_dir=$3; shift 3 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "lm_data: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
[ "$code_mb" -gt 0 ] || { echo "lm_data: --code-mb must be positive" >&2; exit 2; }
for t in python3 tar xz sha256sum; do command -v $t > /dev/null || die "needs $t (Debian: python3, tar, xz-utils)"; done
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)

# The splitter: reads "NAME<TAB>PATH<TAB>KIND" lines (KIND: raw, html, gz, gcide), writes NAME/{train,val}.txt,
# units.tsv and the all/ links. LIMIT_MB > 0 takes units in hash order until that many MB.
split_py=$(cat <<'PY'
import gzip, hashlib, html.parser, os, re, sys
dest, limit, biggest = sys.argv[1], int(sys.argv[2]) * 1000000, int(sys.argv[3]) * 1000
class Text(html.parser.HTMLParser):
    # the text of an HTML page: scripts, styles, navigation and the head dropped; block ends become newlines
    SKIP = {"script", "style", "nav", "head"}
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "pre", "tr", "dt", "dd", "section", "table"}
    def __init__(self):
        super().__init__(convert_charrefs=True); self.out = []; self.skip = 0
    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP: self.skip += 1
        if tag in self.BLOCK: self.out.append("\n")
    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip: self.skip -= 1
    def handle_data(self, d):
        if not self.skip: self.out.append(d)
def html_text(raw):
    p = Text(); p.feed(raw.decode("utf-8", "replace")); p.close()
    t = re.sub(r"[ \t]+\n", "\n", "".join(p.out)); t = re.sub(r"\n{3,}", "\n\n", t)
    return (t.strip() + "\n").encode("utf-8")
def gcide_pieces(name, raw, size=65536):
    # the dictionary is one file of alphabetical entries: pieces of about 64 KB cut at blank lines
    text, i, k = gzip.decompress(raw), 0, 0
    while i < len(text):
        j = text.find(b"\n\n", i + size); j = len(text) if j < 0 else j + 2
        yield "%s/%05d" % (name, k), text[i:j]; i, k = j, k + 1
units = {}
for line in sys.stdin:
    name, path, kind = line.rstrip("\n").split("\t")
    with open(path, "rb") as f: raw = f.read()
    if kind == "gcide": units.update(gcide_pieces(name, raw)); continue
    if kind == "gz": raw = gzip.decompress(raw)
    elif kind == "html": raw = html_text(raw)
    if raw.strip(): units[name] = raw if raw.endswith(b"\n") else raw + b"\n"
if not units: sys.exit("lm_data: no files for %s" % dest)
key = lambda n: int(hashlib.sha1(n.encode("utf-8")).hexdigest()[:8], 16)
names = sorted(units, key=lambda n: (key(n), n))
if biggest > 0: names = [n for n in names if len(units[n]) <= biggest]
if limit > 0:   # the subset: files in hash order, each into its split until that split holds its share of the limit
    have, keep = [0, 0], []
    for n in names:
        s = 1 if key(n) % 10 == 0 else 0
        if have[s] < limit * (0.1 if s else 0.9): keep.append(n); have[s] += len(units[n])
        if have[0] >= limit * 0.9 and have[1] >= limit * 0.1: break
    names = keep
held = sorted(n for n in names if key(n) % 10 == 0); train = sorted(n for n in names if key(n) % 10 != 0)
tr = b"".join(units[n] for n in train); va = b"".join(units[n] for n in held)
if not tr or not va:
    sys.exit("lm_data: %s: %d training and %d held-out files: too few files" % (dest, len(train), len(held)))
# train = 9 x val exactly: a reader that holds out the last 10% of train + val then holds out val
if len(tr) > 9 * len(va): tr = tr[:9 * len(va)]
else: va = va[:len(tr) // 9]; tr = tr[:9 * len(va)]
os.makedirs(os.path.join(dest, "all"), exist_ok=True)
for fn, data in (("train.txt", tr), ("val.txt", va)):
    with open(os.path.join(dest, fn + ".tmp"), "wb") as f: f.write(data)
    os.replace(os.path.join(dest, fn + ".tmp"), os.path.join(dest, fn))
for fn, link in (("train.txt", "1_train.txt"), ("val.txt", "2_val.txt")):
    lp = os.path.join(dest, "all", link)
    if os.path.lexists(lp): os.unlink(lp)
    os.link(os.path.join(dest, fn), lp)
with open(os.path.join(dest, "units.tsv"), "w") as f:
    f.write("split\tbytes\tname\n")
    for n in sorted(names): f.write("%s\t%d\t%s\n" % ("val" if key(n) % 10 == 0 else "train", len(units[n]), n))
print("%s: %d files (%d held out): train %.1f MB, validation %.1f MB" % (os.path.basename(dest), len(names), len(held),
      len(tr) / 1e6, len(va) / 1e6))
PY
)
split_corpus() { python3 -c "$split_py" "$out/$1" "$2" "${3:-0}"; }  # split_corpus NAME LIMIT_MB [MAX_KB] < list

if [ -n "$from_name" ]; then   # one corpus from a folder, no packages
    src=$(cd "$from_dir" && pwd)
    (cd "$src" && find . -type f | LC_ALL=C sort | sed 's|^\./||' |
        awk -v d="$src" '{printf "%s\t%s/%s\traw\n", $0, d, $0}') | split_corpus "$from_name" 0
    exit 0
fi

# ---- the packages ----
command -v apt-get > /dev/null && command -v dpkg-deb > /dev/null || die "needs apt-get and dpkg-deb (a Debian machine)"
debs="$out/debs"; pkgs="$out/pkgs"; tmp="$out/tmp"
mkdir -p "$debs" "$pkgs"
sandbox=""   # as root, apt's download user could not write into OUT: download as root
if [ "$(id -u)" = 0 ]; then apt-get update -qq || die "apt-get update failed"; sandbox="-o APT::Sandbox::User=root"; fi
for p in $kernel $prose_pkgs; do
    if ! ls "$debs/${p}_"*.deb > /dev/null 2>&1; then
        (cd "$debs" && apt-get download -qq $sandbox "$p") ||
            die "apt-get download $p failed (run apt-get update as root first)"
    fi
done
for f in "$debs"/*.deb; do
    stamp="$pkgs/.$(basename "$f").done"
    [ -e "$stamp" ] || { dpkg-deb -x "$f" "$pkgs" && touch "$stamp"; } || die "cannot unpack $f"
done
tarball=$(ls "$pkgs"/usr/src/linux-source-*.tar.xz 2>/dev/null | head -1)
[ -n "$tarball" ] || die "$kernel holds no /usr/src/linux-source-*.tar.xz"
rm -rf "$tmp"; mkdir -p "$tmp"
echo "lm_data: unpacking the kernel's C sources and Documentation/ from $(basename "$tarball")"
tar -xJf "$tarball" -C "$tmp" --wildcards '*.c' '*.h' '*/Documentation/*' || die "cannot unpack $tarball"
ksrc=$(ls -d "$tmp"/linux-source-* | head -1)

# code: every .c and .h, named by its path in the tree
(cd "$ksrc" && find . -type f \( -name '*.c' -o -name '*.h' \) ! -path './Documentation/*' | LC_ALL=C sort |
    sed 's|^\./||' | awk -v d="$ksrc" '{printf "linux/%s\t%s/%s\traw\n", $0, d, $0}') |
    split_corpus code "$code_mb" "$max_kb"

# prose: each package's files by their path inside the package (dpkg-deb -c lists them)
plist() {  # plist PKG REGEX KIND [EXCLUDE_REGEX]: the package's regular files matching REGEX
    local deb; deb=$(ls "$debs/${1}_"*.deb | head -1)
    dpkg-deb -c "$deb" | awk '$1 ~ /^-/ {print $6}' | sed 's|^\./||' | grep -E "$2" | { grep -Ev "${4:-^$}" || true; } |
        LC_ALL=C sort | awk -v p="$1" -v d="$pkgs" -v k="$3" '{n=$0; sub(/^usr\/share\/(doc\/)?/, "", n);
            printf "%s/%s\t%s/%s\t%s\n", p, n, d, $0, k}'
}
{
    (cd "$ksrc" && find Documentation -type f \( -name '*.rst' -o -name '*.txt' \) \
        ! -path 'Documentation/translations/*' | LC_ALL=C sort |
        awk -v d="$ksrc" '{printf "linux/%s\t%s/%s\traw\n", $0, d, $0}')
    plist python3.11-doc '/html/_sources/.*\.txt$' raw
    plist perl-doc '\.pod$' raw
    plist postgresql-doc-15 '\.html$' html
    plist python-django-doc '\.html$' html '/_modules/|/(genindex|search|py-modindex)\.html$'
    plist git-doc '^usr/share/doc/git-doc/.*\.txt$' raw
    books='book|reference|nomicon|rustc|embedded-book|rust-by-example|edition-guide|unstable-book|rustdoc'
    plist rust-doc "/html/($books)/.*\\.html\$" html '/(print|toc|404)\.html$'
    plist sphinx-doc '/_sources/.*\.txt$' raw
    plist debian-handbook '/html/en-US/.*\.html$' html
    plist manpages '^usr/share/man/man[0-9]/.*\.gz$' gz
    plist manpages-dev '^usr/share/man/man[0-9]/.*\.gz$' gz
    plist dict-gcide 'gcide\.dict\.dz$' gcide
} | split_corpus prose "$prose_mb"
rm -rf "$tmp"

# ---- provenance and the bundle ----
{
    echo "# made by examples/lm_data.sh $(date -u +%Y-%m-%d) from these Debian packages:"
    for f in "$debs"/*.deb; do echo "  $(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version)"; done
    echo "# outputs (bytes, sha256):"
    for c in code prose; do for s in train val; do
        echo "  $c/$s.txt $(stat -c %s "$out/$c/$s.txt") $(sha256sum "$out/$c/$s.txt" | cut -d' ' -f1)"
    done; done
} > "$out/SOURCES.txt"
if [ "$bundle" = 1 ]; then   # one bundle per corpus: a device call carries the one it trains on
    for c in code prose; do
        echo "lm_data: compressing the $c bundle (xz -9)"
        (cd "$out" && tar -c SOURCES.txt "$c" | xz -9 -T2 > "lm_$c.tar.xz.tmp" &&
            mv "lm_$c.tar.xz.tmp" "lm_$c.tar.xz") ||
            die "cannot write $out/lm_$c.tar.xz"
        echo "lm_data: $out/lm_$c.tar.xz: $(stat -c %s "$out/lm_$c.tar.xz") bytes"
    done
fi
cat "$out/SOURCES.txt"
