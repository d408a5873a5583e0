# The devcloud's Magnum part (docs/magnum.md): the real Magnum API + conductor from PyPI in their
# own venv (.devcloud/magnum-venv: Magnum's pins need not agree with Nova's), our cluster driver
# devcloud/magnum_driver installed there editable (entry point magnum.drivers: devcloud; a change is
# live at the next conductor start). Needs the Nova part (Keystone, RabbitMQ, Glance, Nova).
# `make devcloud-up` installs it first (as devcloud-install does the Nova part), so a newcomer's
# bring-up has Magnum without knowing this target (issue 38: it was left out unless
# `make magnum-install` ran first); DEVCLOUD_MAGNUM=0 leaves it out. CI starts the devcloud only
# once it is installed (ci-devcloud-up: the order holds under make -j too).
DEVCLOUD_MAGNUM_VENV := $(DEVCLOUD_STATE)/magnum-venv
CI_PREREQS := $(filter-out devcloud-up,$(CI_PREREQS)) magnum-install ci-devcloud-up
ifneq ($(DEVCLOUD_MAGNUM),0)
devcloud-up: magnum-install
endif

.PHONY: ci-devcloud-up
ci-devcloud-up: devcloud-install magnum-install
	@$(MAKE) --no-print-directory devcloud-up

.PHONY: magnum-install test-magnum

$(DEVCLOUD_MAGNUM_VENV)/.installed: devcloud/requirements-magnum.txt devcloud/constraints-nova.txt \
		devcloud/magnum_driver/pyproject.toml
	test -x $(DEVCLOUD_MAGNUM_VENV)/bin/python || python3 -m venv $(DEVCLOUD_MAGNUM_VENV)
	$(DEVCLOUD_MAGNUM_VENV)/bin/pip install -q --upgrade pip
	$(DEVCLOUD_MAGNUM_VENV)/bin/pip install -q -r devcloud/requirements-magnum.txt -c devcloud/constraints-nova.txt
	$(DEVCLOUD_MAGNUM_VENV)/bin/pip install -q --no-deps --no-build-isolation -e devcloud/magnum_driver
	$(DEVCLOUD_MAGNUM_VENV)/bin/pip check
	touch $@

magnum-install: $(DEVCLOUD_MAGNUM_VENV)/.installed ## the devcloud's Magnum venv (.devcloud/magnum-venv) with our cluster driver

test-magnum: venv ## Magnum driver against the devcloud's real Magnum API (needs `make devcloud-up`)
	$(PY) -m pytest tests/magnum -q
