# The perl recipe's program (data/recipes/record_traces.py): word, bigram and line statistics
# of a text file. Hashes that grow with the vocabulary and its bigrams, every line kept in an
# array, a sort of the words and of the lines, and a regular-expression pass over them.
# Deterministic output: every sort breaks ties by the string itself.
use strict;
use warnings;

my (%words, %bigrams, %first, @lines);
while (my $line = <>) {
    chomp $line;
    push @lines, $line;
    my $prev = '';
    for my $w (split /[^a-z]+/, lc $line) {
        next if $w eq '';
        $words{$w}++;
        $bigrams{"$prev $w"}++ if $prev ne '';
        push @{ $first{ substr($w, 0, 2) } }, $w;
        $prev = $w;
    }
}

my @by_count = sort { $words{$b} <=> $words{$a} || $a cmp $b } keys %words;
my @top_pairs = (sort { $bigrams{$b} <=> $bigrams{$a} || $a cmp $b } keys %bigrams)[0 .. 9];
my ($longest, $prefixes) = (0, 0);
for my $p (sort keys %first) {
    my %seen = map { $_ => 1 } @{ $first{$p} };
    $prefixes++;
    $longest = scalar(keys %seen) if scalar(keys %seen) > $longest;
}

# the lines in order, each with its doubled vowels squeezed and its words reversed
my ($chars, $squeezed) = (0, 0);
for my $line (sort @lines) {
    (my $s = $line) =~ s/([aeiou])\1+/$1/g;
    $squeezed += length($line) - length($s);
    $chars += length join ' ', reverse split / /, $s;
}

printf "%d lines, %d words (%d distinct), %d bigrams, %d prefixes (at most %d words each)\n",
    scalar(@lines), eval { my $n = 0; $n += $_ for values %words; $n }, scalar(@by_count),
    scalar(keys %bigrams), $prefixes, $longest;
printf "top words: %s\n", join ' ', @by_count[0 .. 9];
printf "top bigrams: %s\n", join ', ', @top_pairs;
printf "%d characters after squeezing %d doubled vowels\n", $chars, $squeezed;
