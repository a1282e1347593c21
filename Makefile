# amber: checkpoint/restore for Linux process trees
CC      ?= gcc
CFLAGS  ?= -O2 -g
BASE_CFLAGS := -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	   -D_GNU_SOURCE -Iinclude -Isrc -Ibuild/gen -MMD -MP \
	   $(shell pkg-config --cflags libnl-route-3.0 libnftables)
CFLAGS  += $(BASE_CFLAGS)
# Static where Debian ships the archive, libnftables opened on first use (src/net/nft.c):
# each mapped library is copied into, and unmapped from, every process a restore forks.
# Bound at start (-z now): lazily, every process a restore forks would resolve
# and write amber's symbols again, a copy-on-write fault a page of them.
LDFLAGS += -Wl,-z,now,-z,relro
LDLIBS  += -Wl,-Bstatic -lprotobuf-c -lxxhash $(shell pkg-config --libs libnl-route-3.0) \
	   -Wl,-Bdynamic -ldl

B       := build
SRCS    := $(wildcard src/*.c src/*/*.c)
PROTOS  := $(wildcard images/*.proto)
PB_C    := $(PROTOS:images/%.proto=$(B)/gen/%.pb-c.c)
OBJS    := $(SRCS:src/%.c=$(B)/obj/%.o) $(PROTOS:images/%.proto=$(B)/obj/%.pb-c.o)
LIBOBJS := $(filter-out $(B)/obj/main.o,$(OBJS))

PROGS_SRC := $(wildcard tests/e2e/progs/*.c)
PROGS     := $(PROGS_SRC:tests/e2e/progs/%.c=$(B)/progs/%)
UNIT_SRC  := $(wildcard tests/unit/*.c)
UNITS     := $(UNIT_SRC:tests/unit/%.c=$(B)/unit/%)
TOOL_SRC  := $(wildcard tests/tools/*.c)
TOOLS     := $(TOOL_SRC:tests/tools/%.c=$(B)/tools/%)

all: $(B)/amber

# protoc-c writes every generated file at once; the stamp stands for them all.
$(B)/gen/.stamp: $(PROTOS)
	@mkdir -p $(B)/gen
	protoc-c --proto_path=images --c_out=$(B)/gen $(PROTOS)
	@touch $@

$(PB_C) $(PB_C:.c=.h): $(B)/gen/.stamp

$(B)/obj/%.pb-c.o: $(B)/gen/%.pb-c.c $(B)/gen/.stamp
	@mkdir -p $(B)/obj
	$(CC) $(CFLAGS) -c -o $@ $<

# pie/: code that runs inside the target, embedded as bytes (position independent).
$(B)/gen/pie-%.h: pie/%.S
	@mkdir -p $(B)/gen
	$(CC) -c -o $(B)/gen/pie-$*.o $<
	objcopy -O binary -j .text $(B)/gen/pie-$*.o $(B)/gen/pie-$*.bin
	{ echo "/* generated from $< */"; echo "static const unsigned char pie_$*[] = {"; \
	  od -An -v -tx1 $(B)/gen/pie-$*.bin | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo "};"; } > $@

$(B)/obj/infect.o: $(B)/gen/pie-batch.h

$(B)/obj/%.o: src/%.c $(B)/gen/.stamp
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# xxhash inlined for AVX2, called only where the CPU has it (src/hash.h)
$(B)/obj/hash-avx2.o: CFLAGS += -mavx2

$(B)/libamber.a: $(LIBOBJS)
	ar rcs $@ $^

$(B)/amber: $(B)/obj/main.o $(B)/libamber.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Test programs (targets of checkpoint/restore).  *-static.c build static.
$(B)/progs/%: tests/e2e/progs/%.c tests/e2e/progs/prog.h
	@mkdir -p $(B)/progs
	$(CC) -MMD -MP -O1 -g -Wall -D_GNU_SOURCE $(if $(findstring static,$*),-static,) -o $@ $< $(if $(findstring avx512,$*),-mavx512f,-mavx2) -lrt -pthread

$(B)/unit/%: tests/unit/%.c $(B)/libamber.a
	@mkdir -p $(B)/unit
	$(CC) $(CFLAGS) -o $@ $< $(B)/libamber.a $(LDLIBS) -lcmocka

# Helpers of the tests (tests/tools/): image editing as an attacker would.
$(B)/tools/%: tests/tools/%.c $(B)/libamber.a
	@mkdir -p $(B)/tools
	$(CC) $(CFLAGS) -o $@ $< $(B)/libamber.a $(LDLIBS)

progs: $(PROGS)
units: $(UNITS)
tools: $(TOOLS)

# Fuzz targets (fuzz/, libFuzzer): amber's sources built again with clang, ASan and UBSan.
FUZZ_CC      ?= clang-14
FUZZ_CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
		-fno-sanitize-recover=all $(BASE_CFLAGS)
FUZZ_OBJS    := $(LIBOBJS:$(B)/obj/%=$(B)/fuzz/obj/%)
FUZZ_BINS    := $(patsubst fuzz/%.c,$(B)/fuzz/%,$(wildcard fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 60

$(B)/fuzz/obj/%.pb-c.o: $(B)/gen/%.pb-c.c $(B)/gen/.stamp
	@mkdir -p $(B)/fuzz/obj
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(B)/fuzz/obj/infect.o: $(B)/gen/pie-batch.h

$(B)/fuzz/obj/%.o: src/%.c $(B)/gen/.stamp
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(B)/fuzz/obj/hash-avx2.o: FUZZ_CFLAGS += -mavx2

$(B)/fuzz/libamber.a: $(FUZZ_OBJS)
	ar rcs $@ $^

$(B)/fuzz/fuzz_%: fuzz/fuzz_%.c $(B)/fuzz/libamber.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Ifuzz -fsanitize=fuzzer -o $@ $< $(B)/fuzz/libamber.a $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

# each target for FUZZ_SECONDS; fuzz-ci: regression inputs, seeds, 20 s each (fuzz/run.sh)
fuzz: fuzz-build
	fuzz/run.sh fuzz $(FUZZ_SECONDS)

fuzz-ci: fuzz-build
	fuzz/run.sh ci

# The man page, amber(8), from doc/amber.8.scd (scdoc).
$(B)/amber.8: doc/amber.8.scd
	@mkdir -p $(B)
	scdoc < $< > $@

man: $(B)/amber.8

PREFIX  ?= /usr/local
install: $(B)/amber $(B)/amber.8
	install -D -m 0755 $(B)/amber $(DESTDIR)$(PREFIX)/sbin/amber
	install -D -m 0644 $(B)/amber.8 $(DESTDIR)$(PREFIX)/share/man/man8/amber.8

# opt-in: criu as a link to amber, for runtimes that run criu (runc, crun): amber
# run as criu answers criu --version with CRIU's "Version:" line and serves criu swrk.
install-criu-alias: install
	ln -sfn amber $(DESTDIR)$(PREFIX)/sbin/criu

setup:
	scripts/setup.sh

test: all progs units tools
	tests/run-all.sh

# test, fuzz-ci and the kernel rig (kernel/, QEMU): what CI runs
test-all: all progs units tools fuzz-build
	tests/test-all.sh

bench: all progs
	scripts/setup.sh bench
	bench/run.sh

demo: all progs
	tests/demo.sh

format:
	clang-format -i src/*.c src/*.h src/*/*.c src/*/*.h tests/unit/*.c tests/e2e/progs/*.c fuzz/*.c fuzz/*.h

clean:
	rm -rf $(B)

.PHONY: all man install install-criu-alias setup progs units tools test test-all bench demo format clean fuzz-build fuzz fuzz-ci
-include $(OBJS:.o=.d) $(PROGS:=.d) $(FUZZ_OBJS:.o=.d) $(FUZZ_BINS:=.d)
