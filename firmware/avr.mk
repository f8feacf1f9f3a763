# ATmega2560 target of the bench firmware and its simavr harness (included by firmware/Makefile).
#   make avr        build/avr/bemore-avr.elf and .hex with avr-gcc; prints flash and RAM use
#   make avrsim     build/avr/avrsim: the firmware ELF run by simavr, UART on a pty, plant model
# Needs the Debian packages gcc-avr avr-libc (avr) and simavr libsimavr-dev libelf-dev pkg-config
# (avrsim), listed in tools/system-packages.txt.
AVR_CC ?= avr-gcc
AVR_OBJCOPY ?= avr-objcopy
AVR_SIZE ?= avr-size
AVR_MCU := atmega2560
AVR_FLAGS := -mmcu=$(AVR_MCU) -DF_CPU=16000000UL -O2 -flto -g -ffunction-sections -fdata-sections
AVR_WARN := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
AVR_B := $(B)/avr
AVR_SRC := $(CORE_SRC) board/avr/main.c board/avr/hal_avr.c
AVR_HDRS := $(wildcard src/*.h board/avr/*.h)
AVRSIM_SRC := sim/avr/avrsim.c sim/avr/harness.c sim/avr/loadgen.c board/host/plant.c \
	board/host/pty.c src/link.c
AVRSIM_HDRS := $(wildcard sim/avr/*.h) board/host/plant.h board/host/pty.h board/avr/board.h src/link.h src/protocol_gen.h
SIMAVR_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags simavr 2>/dev/null || echo -I/usr/include/simavr))
SIMAVR_LIBS = $(shell pkg-config --libs simavr 2>/dev/null || echo -lsimavr) -lelf

.PHONY: avr avrsim

avr: $(AVR_B)/bemore-avr.hex
	@flash=$$($(AVR_SIZE) -A $(AVR_B)/bemore-avr.elf | awk '$$1==".text"||$$1==".data"{s+=$$2} END{print s}'); \
	 ram=$$($(AVR_SIZE) -A $(AVR_B)/bemore-avr.elf | awk '$$1==".data"||$$1==".bss"||$$1==".noinit"{s+=$$2} END{print s}'); \
	 echo "bemore-avr ($(AVR_MCU)): flash $$flash of 262144 bytes ($$(( flash * 1000 / 262144 / 10 )).$$(( flash * 1000 / 262144 % 10 ))%), RAM $$ram of 8192 bytes ($$(( ram * 1000 / 8192 / 10 )).$$(( ram * 1000 / 8192 % 10 ))%) static, stack not counted"

$(AVR_B)/bemore-avr.elf: $(AVR_SRC) $(AVR_HDRS) avr.mk
	@mkdir -p $(AVR_B)
	$(AVR_CC) $(AVR_WARN) $(AVR_FLAGS) -Isrc -Iboard/avr -Wl,--gc-sections -o $@ $(AVR_SRC)

$(AVR_B)/bemore-avr.hex: $(AVR_B)/bemore-avr.elf
	$(AVR_OBJCOPY) -O ihex -R .eeprom $< $@

avrsim: $(AVR_B)/avrsim $(AVR_B)/bemore-avr.hex

$(AVR_B)/avrsim: $(AVRSIM_SRC) $(AVRSIM_HDRS)
	@mkdir -p $(AVR_B)
	$(CC) $(WARN) $(CFLAGS) $(SIMAVR_CFLAGS) -Isim/avr -Isrc -Iboard/host -Iboard/avr -o $@ \
	    $(AVRSIM_SRC) $(SIMAVR_LIBS) -lm
