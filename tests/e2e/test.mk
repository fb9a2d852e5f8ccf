# tests/e2e — multi-rank (dist), preemption, failures, Slurm end to end.
#   make test-e2e-dist   collectives under mpirun and srun-style TCP, kill -9, stop signals
#   make test-slurm      the local Slurm harness (tests/slurm/cluster.sh)
#   make test-e2e        the trainer through the local two-node Slurm (needs llmc + llmc-train)
E2E_DIST_TEST := $(BUILD)/tests/e2e/dist_test

$(BUILD)/tests/e2e/dist_test.o: tests/e2e/dist_test.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(E2E_DIST_TEST): $(BUILD)/tests/e2e/dist_test.o $(call runtime_objs,dist log stopsig)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ $(MPI_LIBS) -lm

# dist.c built as on a machine without mpicc (no LLMC_WITH_MPI).
$(BUILD)/tests/e2e/dist_nompi.o: runtime/base/dist.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/tests/e2e/dist_test_nompi: $(BUILD)/tests/e2e/dist_test.o $(BUILD)/tests/e2e/dist_nompi.o $(call runtime_objs,log stopsig)
	$(CC) $(LDFLAGS) -pthread -o $@ $^ -lm

TEST_SUITES += e2e-dist
TEST_BUILD += $(E2E_DIST_TEST) $(BUILD)/tests/e2e/dist_test_nompi
.PHONY: test-e2e-dist
test-e2e-dist: $(E2E_DIST_TEST) $(BUILD)/tests/e2e/dist_test_nompi
	@NOMPI_BIN=$(BUILD)/tests/e2e/dist_test_nompi bash tests/e2e/dist.sh $(E2E_DIST_TEST)

# llmc-train across ranks, stop signals and kills, without Slurm.
TEST_SUITES += e2e-train
.PHONY: test-e2e-train
test-e2e-train: $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards
	@bash tests/e2e/train.sh $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards

# ZeRO-1/2/3 on the CPU backend across ranks: bit-identity with 1 rank, resume across stages and rank counts.
TEST_SUITES += e2e-zero
.PHONY: test-e2e-zero
test-e2e-zero: $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards $(BUILD)/llmc
	@bash tests/e2e/zero.sh $(BUILD)/llmc-train $(BUILD)/tests/cpu/make_shards $(BUILD)/llmc

# The emitted script through sbatch on the local two-node Slurm (root).
TEST_SUITES += e2e-slurm
.PHONY: test-e2e-slurm
test-e2e-slurm: $(BUILD)/llmc $(BUILD)/llmc-train $(E2E_DIST_TEST)
	@bash tests/e2e/slurm.sh $(BUILD)/llmc $(BUILD)/llmc-train $(E2E_DIST_TEST)

# The same dist tests with runtime/base/dist.c built with ASan + UBSan (build/san).
TEST_SUITES += e2e-dist-san
.PHONY: test-e2e-dist-san
TEST_BUILD_SAN += build/san/tests/e2e/dist_test
test-e2e-dist-san:
	@$(MAKE) --no-print-directory -s SAN=1 build/san/tests/e2e/dist_test
	@E2E_SAN=1 bash tests/e2e/dist.sh build/san/tests/e2e/dist_test

# A real 1-minute time limit with Slurm's own USR2 warning (about 40 s).
TEST_SUITES += e2e-timelimit
.PHONY: test-e2e-timelimit
test-e2e-timelimit: $(BUILD)/llmc $(BUILD)/llmc-train
	@bash tests/e2e/timelimit.sh $(BUILD)/llmc $(BUILD)/llmc-train

# A USR2 during prepare under the local Slurm: requeue and resume (about a minute).
TEST_SUITES += e2e-prepare
.PHONY: test-e2e-prepare
test-e2e-prepare: $(BUILD)/llmc $(BUILD)/llmc-train
	@bash tests/e2e/prepare_requeue.sh $(BUILD)/llmc $(BUILD)/llmc-train

# runtime/train/prom.c on its own (under SAN=1), its file through promtool (tests/e2e/prom_test.sh).
$(BUILD)/tests/e2e/prom_test: $(BUILD)/tests/e2e/prom_test.o $(call runtime_objs,prom log)
	$(CC) $(LDFLAGS) -o $@ $^ -lm
$(BUILD)/tests/e2e/prom_test.o: tests/e2e/prom_test.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

TEST_SUITES += e2e-prom
TEST_BUILD_SAN += build/san/tests/e2e/prom_test
.PHONY: test-e2e-prom
test-e2e-prom:
	@$(MAKE) --no-print-directory -s SAN=1 build/san/tests/e2e/prom_test
	@bash tests/e2e/prom_test.sh build/san/tests/e2e/prom_test

# A LLaMA-Factory run three times its 1-minute limit, with a stand-in for
# llamafactory-cli (about 6 min): requeued before each limit, resumed each time.
TEST_SUITES += e2e-lf-timelimit
.PHONY: test-e2e-lf-timelimit
test-e2e-lf-timelimit: $(BUILD)/llmc
	@bash tests/e2e/lf_timelimit.sh $(BUILD)/llmc

# Chained jobs (after =): out/submit.sh on the local Slurm, the second job
# waiting (afterok) through a requeue of the first, starting from its adapter.
TEST_SUITES += e2e-lf-chain
.PHONY: test-e2e-lf-chain
test-e2e-lf-chain: $(BUILD)/llmc
	@bash tests/e2e/lf_chain.sh $(BUILD)/llmc

# LoRA SFT -> merge -> full DPO (a merge job: llamafactory-cli export) on the
# local Slurm, the stand-in exporting the merged model the DPO job loads.
TEST_SUITES += e2e-lf-merge
.PHONY: test-e2e-lf-merge
test-e2e-lf-merge: $(BUILD)/llmc
	@bash tests/e2e/lf_merge.sh $(BUILD)/llmc
